#include "actors/router/frontend/text_setup.hpp"

#include <fstream>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

namespace outrider::router {

namespace {

// The chat template: --chat-template's file (exit 2 when it cannot be
// used), else the tokenizer's own (a warning when it cannot: completions
// still work, chat requests get 400 saying why).
bool load_chat_template(runtime::role_env& ctx, const std::string& file,
                        frontend_config& fc) {
  std::string source = fc.tokenizer->chat_template(), why;
  if (!file.empty()) {
    std::ifstream in{file};
    if (!in) {
      ctx.control->request_exit(2, "--chat-template: cannot read " + file);
      return false;
    }
    source.assign(std::istreambuf_iterator<char>{in}, {});
  }
  if (source.empty()) {
    fc.chat_template_error = "the tokenizer has no chat_template (give one "
                             "with --chat-template FILE)";
    spdlog::warn("router: {}", fc.chat_template_error);
    return true;
  }
  fc.chat_template = text::chat_template::compile(source, &why);
  if (fc.chat_template)
    return true;
  if (!file.empty()) {
    ctx.control->request_exit(2, "--chat-template: " + file + ": " + why);
    return false;
  }
  fc.chat_template_error = why;
  spdlog::warn("router: /v1/chat/completions is off: {}", why);
  return true;
}

} // namespace

std::shared_ptr<const text::tokenizer> process_tokenizer(const std::string& dir,
                                                         std::string* why) {
  static std::mutex mtx;
  static std::map<std::string, std::shared_ptr<const text::tokenizer>> loaded;
  std::lock_guard<std::mutex> guard{mtx};
  auto& t = loaded[dir];
  if (!t)
    t = text::tokenizer::load(dir, why);
  return t;
}

bool load_text(runtime::role_env& ctx, const router_settings& s,
               frontend_config& fc) {
  const auto& dir = s.tokenizer_dir;
  if (dir.empty())
    return true;
  std::string why;
  fc.tokenizer = process_tokenizer(dir, &why);
  if (!fc.tokenizer) {
    ctx.control->request_exit(2, "--tokenizer: " + why);
    return false;
  }
  spdlog::info("router: tokenizer from {} ({} tokens)", dir,
               fc.tokenizer->vocab_size());
  return load_chat_template(ctx, s.chat_template_file, fc);
}

} // namespace outrider::router
