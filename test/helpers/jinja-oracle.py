"""Renders chat templates with Python's jinja2, set up as Hugging Face transformers does
(src/transformers/utils/chat_template_utils.py, _compile_jinja_template and render_jinja_template):
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, the loopcontrols extension and the
{% generation %} tag (transformers' AssistantTracker, which renders its body unchanged), a
`tojson` filter that is json.dumps (non-ASCII kept, indent / separators / sort_keys honoured), and
the globals raise_exception and strftime_now. tools and documents are always passed (None when not
given), as apply_chat_template does.

stdin: {"template": str, "contexts": [{"messages": [...], "add_generation_prompt": bool, ...}]}
stdout: [{"out": str} | {"error": "ExceptionName: message"}], one per context, as ASCII JSON.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: the body, as transformers' AssistantTracker renders it when not tracking"""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def main():
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    results = []
    try:
        template = env.from_string(request["template"])
    except Exception as e:  # noqa: BLE001 - reported to the caller
        error = {"error": f"{type(e).__name__}: {e}"}
        results = [error for _ in request["contexts"]]
    else:
        for context in request["contexts"]:
            kwargs = {"tools": None, "documents": None, **context}
            try:
                results.append({"out": template.render(**kwargs)})
            except Exception as e:  # noqa: BLE001 - reported to the caller
                results.append({"error": f"{type(e).__name__}: {e}"})
    sys.stdout.write(json.dumps(results, ensure_ascii=True))


main()
