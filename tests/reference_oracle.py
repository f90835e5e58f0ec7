"""Run under the real TIRx's python (TIRX_REFERENCE_PYTHON), never imported by tirx's tests.

Reads a JSON list of cases on stdin and prints a JSON list of answers:

* ``{"kind": "map", "layout": TEXT, "shape": [...]}`` -> ``{"map": [[lane, slot], ...]}``: the
  layout's (laneid, m) for every coordinate of ``shape``, row-major;
* ``{"kind": "compile", "source": TEXT, "name": NAME}`` -> ``{"ok": bool, "error": TEXT}``:
  whether the kernel in ``source`` (a module importing ``tvm_tirx``) compiles for sm_90.
"""

import importlib.util
import itertools
import json
import os
import sys
import tempfile


def _layout_map(text, shape):
    from tvm_tirx.backend.cuda.axis import laneid  # noqa: F401 - the layout text names it
    from tvm_tirx.tirx.layout import S, TileLayout  # noqa: F401

    layout = eval(text)  # the test's own layout text, e.g. TileLayout(S[(...) : (...)])
    out = []
    for coord in itertools.product(*(range(e) for e in shape)):
        point = {str(k): int(v) for k, v in layout.apply(*coord, shape=list(shape)).items()}
        out.append([point.get("laneid", -1), point.get("m", 0)])
    return {"map": out}


def _compile(source, name, directory):
    from tvm_tirx.tirx import compile as tirx_compile

    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        tirx_compile(module.kernel, target={"kind": "cuda", "arch": "sm_90"})
    except Exception as e:  # the oracle's verdict, whatever its exception type
        return {"ok": False, "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"}
    return {"ok": True, "error": ""}


def main():
    cases = json.load(sys.stdin)
    answers = []
    with tempfile.TemporaryDirectory() as directory:
        for i, case in enumerate(cases):
            if case["kind"] == "map":
                answers.append(_layout_map(case["layout"], case["shape"]))
            else:
                answers.append(_compile(case["source"], f"case_{i}", directory))
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
