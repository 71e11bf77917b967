#pragma once

#include <cstddef>
#include <string_view>

namespace outrider::runtime {

/// True when `s` is well-formed UTF-8 (checked with utf8proc).
bool valid_utf8(std::string_view s);

/// True when no array or object in the JSON text `s` nests deeper than
/// `max_depth` (brackets inside strings do not count). A cheap scan done
/// before parsing, so that hostile nesting never reaches a recursive
/// parser or copy. Malformed JSON passes here and fails the parser.
bool json_depth_within(std::string_view s, size_t max_depth);

/// True when no object in the JSON text `s` has more than `max_members`
/// members (counted by their commas; strings skipped), in one linear scan.
/// For texts parsed into an insertion-ordered object, whose every insert
/// looks its key up linearly: 100,000 keys would take seconds. Assumes
/// `json_depth_within` passed (its stack is as deep as the nesting).
bool json_object_members_within(std::string_view s, size_t max_members);

} // namespace outrider::runtime
