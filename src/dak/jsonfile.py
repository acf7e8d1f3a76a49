"""Reading user-supplied JSON files with errors that say which file and what is wrong."""

from __future__ import annotations

import json


def load_json(path: str, what: str):
    """Parsed JSON of `path`; ValueError naming `what` (e.g. 'hardware profile') on failure."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError as e:
        raise ValueError(f"cannot read {what} {path!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} {path!r} is not valid JSON ({e.msg} at line {e.lineno})") from None
