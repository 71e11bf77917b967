#!/usr/bin/python3
"""Renders chat templates as Hugging Face transformers renders them, for
outrider's template golden test: reads {"templates": {name: source},
"cases": [{"template": name, "vars": {...}}]} on stdin and prints, per
case, {"text": ...} or {"error": ...}.

The environment is set up the way transformers' chat-template code sets
it up (facts of its behaviour, in my own words): a sandboxed environment
with trim_blocks, lstrip_blocks and the loop controls, tojson as
json.dumps with ensure_ascii off, raise_exception raising a template
error, strftime_now formatting the current time."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None,
           sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

doc = json.load(sys.stdin)
compiled = {}
out = []
for case in doc["cases"]:
    name = case["template"]
    try:
        if name not in compiled:
            compiled[name] = env.from_string(doc["templates"][name])
        out.append({"text": compiled[name].render(**case["vars"])})
    except Exception as e:  # the C++ side must fail too
        out.append({"error": f"{type(e).__name__}: {e}"})
print(json.dumps(out, ensure_ascii=False))
