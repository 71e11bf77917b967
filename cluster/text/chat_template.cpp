#include "cluster/text/chat_template.hpp"

#include "cluster/text/jinja/render.hpp"

namespace outrider::text {

std::shared_ptr<const chat_template>
chat_template::compile(const std::string& src, std::string* why) {
  auto t = std::make_shared<chat_template>();
  try {
    t->body_ = jinja::parse_template(src);
  } catch (const jinja::template_error& e) {
    *why = "chat template: " + e.message;
    return nullptr;
  } catch (const std::exception& e) { // not expected: a safety net
    *why = std::string("chat template: ") + e.what();
    return nullptr;
  }
  return t;
}

std::optional<std::string>
chat_template::render(const nlohmann::ordered_json& vars,
                      std::string* why) const {
  auto v = jinja::from_json(vars);
  if (v.k != jinja::value::kind::dict) {
    *why = "chat template: the variables must be an object";
    return std::nullopt;
  }
  try {
    return jinja::render(body_, *v.m);
  } catch (const jinja::template_error& e) {
    *why = e.message;
    return std::nullopt;
  } catch (const std::exception& e) { // not expected: a safety net
    *why = std::string("chat template: ") + e.what();
    return std::nullopt;
  }
}

} // namespace outrider::text
