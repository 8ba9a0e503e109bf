"""Renders chat templates with Python's jinja2, set up as Hugging Face transformers does
(src/transformers/utils/chat_template_utils.py, _compile_jinja_template and render_jinja_template):
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, the loopcontrols extension and the
{% generation %} tag (transformers' AssistantTracker, which renders its body unchanged), a
`tojson` filter that is json.dumps (non-ASCII kept, indent / separators / sort_keys honoured), and
the globals raise_exception and strftime_now. tools and documents are always passed (None when not
given), as apply_chat_template does.

stdin: {"template": str, "contexts": [{"messages": [...], "add_generation_prompt": bool, ...}]}
stdout: [{"out": str} | {"error": "ExceptionName: message"}], one per context, as ASCII JSON.
Or, for many templates in one process (scripts/jinja-diff.ts): stdin {"batch": [{"template", "contexts"}, ...],
"seconds": limit per template}, stdout a list of such lists; a render past the limit is {"error": "Timeout: ..."}.
"""
import json
import signal
import sys
import warnings
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


def render_all(env, source, contexts):
    results = []
    try:
        template = env.from_string(source)
    except Exception as e:  # noqa: BLE001 - reported to the caller
        error = {"error": f"{type(e).__name__}: {e}"}
        return [error for _ in contexts]
    for context in contexts:
        kwargs = {"tools": None, "documents": None, **context}
        try:
            results.append({"out": template.render(**kwargs)})
        except Exception as e:  # noqa: BLE001 - reported to the caller
            results.append({"error": f"{type(e).__name__}: {e}"})
    return results


def on_timeout(signum, frame):
    raise TimeoutError("the template ran past its time limit")


def main():
    # jinja2 compiles a template to Python, which warns of `1[0]` and the like on stderr: the render says what it does
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    if "batch" not in request:
        sys.stdout.write(json.dumps(render_all(env, request["template"], request["contexts"]), ensure_ascii=True))
        return
    signal.signal(signal.SIGALRM, on_timeout)
    out = []
    for item in request["batch"]:
        signal.setitimer(signal.ITIMER_REAL, request.get("seconds", 2))
        try:
            out.append(render_all(env, item["template"], item["contexts"]))
        except TimeoutError as e:
            out.append([{"error": f"Timeout: {e}"} for _ in item["contexts"]])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    sys.stdout.write(json.dumps(out, ensure_ascii=True))


main()
