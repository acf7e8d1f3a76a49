"""The suite's own set-up: a module that turns the Triton interpreter on unconditionally at import
would make every later `gpu` test skip when the whole suite runs on a GPU machine (it happened:
`pytest -m gpu tests` on the H200 skipped all 63)."""

import pathlib
import re

SET = re.compile(r'^os\.environ(\.setdefault\(|\[)\s*"TRITON_INTERPRET"', re.M)


def test_no_test_module_turns_the_interpreter_on_unconditionally():
    here = pathlib.Path(__file__).parent
    offenders = [p.name for p in sorted(here.glob("*.py")) if SET.search(p.read_text())]
    assert not offenders, (f"{offenders} set TRITON_INTERPRET at module level; only under "
                           "`if not torch.cuda.is_available():` (tests/conftest.py already does it)")
