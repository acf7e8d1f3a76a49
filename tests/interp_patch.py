"""A faster Triton CPU interpreter for the test suite (tests only; dak itself does not patch Triton).

Triton's interpreter (3.x) patches `triton.language` into interpreted form at every call of a
@triton.jit function: once for a launch (restored after it) and again at every device-function call
inside it (`InterpretedFunction.__call__`, never restored), each patch scanning the modules with
`inspect.getmembers`. dak's kernels call helpers (and Triton's own @jit functions such as
`tl.zeros`) in their loops, so the scans were a fifth of a tiny model's decode step in the
interpreter. Here a device call patches only modules that are not patched already: those of the
launch in progress, or those an earlier device call left patched (as Triton leaves them). A launch
still patches and restores exactly as Triton does.
"""

import inspect


def install() -> bool:
    """Install the patch once; False (and nothing changed) where Triton's interpreter lacks the
    functions it wraps."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as ti
        real, run, empty = ti._patch_lang, ti.GridExecutor.__call__, ti._LangPatchScope
    except (ImportError, AttributeError):
        return False
    if getattr(real, "dak_once", False):
        return True
    launching = [False]  # the next patch is a launch's own (GridExecutor), restored after the launch
    live = []            # the module sets that launches in progress patched
    kept = set()         # modules device calls patched (Triton never restores those)

    def modules(fn):
        return {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)}

    def patch_lang(fn):
        mods = modules(fn)
        if launching[0]:
            launching[0] = False
            scope = patch_lang.dak_real(fn)
            live.append(mods)
            restore = scope.restore

            def undo():
                live.remove(mods)
                restore()
            scope.restore = undo
            return scope
        now = set().union(*live) if live else set()
        if mods <= now | kept:
            return empty()
        scope = patch_lang.dak_real(fn)
        kept.update(mods - now)
        return scope

    def call(self, *args, **kwargs):
        launching[0] = True
        try:
            return run(self, *args, **kwargs)
        finally:
            launching[0] = False

    patch_lang.dak_once = True
    patch_lang.dak_real = real
    ti._patch_lang = patch_lang
    ti.GridExecutor.__call__ = call
    return True
