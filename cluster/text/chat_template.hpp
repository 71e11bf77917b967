#pragma once

// A model's chat template (tokenizer_config.json's chat_template), run by
// outrider's own interpreter of the Jinja subset real chat templates use
// (cluster/text/jinja/: for/if/elif/else/set, namespace, loop variables,
// slicing, string concatenation, comparisons and `in`, filters, tests,
// raise_exception and strftime_now), rendered as Hugging Face renders
// them (trim_blocks, lstrip_blocks, loop controls, tojson as json.dumps).
// No C++ library interprets Jinja, so it is hand-written.

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/text/jinja/ast.hpp"

namespace outrider::text {

class chat_template {
 public:
  /// nullptr and `*why` (with the template's line) when it cannot be
  /// parsed or uses what the interpreter does not support.
  static std::shared_ptr<const chat_template> compile(const std::string& src,
                                                      std::string* why);
  /// The template's text for `vars` (an object: messages,
  /// add_generation_prompt, tools, bos_token, ...); nullopt and `*why`
  /// when rendering fails (raise_exception included).
  std::optional<std::string> render(const nlohmann::ordered_json& vars,
                                    std::string* why) const;

 private:
  jinja::body body_;
};

} // namespace outrider::text
