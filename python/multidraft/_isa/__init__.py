"""Load-time choice of the compiled core.

The C++ core is compiled once per instruction-set level into ``multidraft/_isa/<level>/_core``:
``baseline`` (any CPU of the architecture), ``avx2`` (x86-64-v3) and ``avx512`` (x86-64-v4) on
x86-64, or a single ``native`` module when built with ``MULTIDRAFT_NATIVE=ON``. The package imports
the highest level that this CPU runs (asked of the baseline ``_probe`` module), or the one the
environment variable ``MULTIDRAFT_ISA`` names. Exactly one core is imported per process: each
holds its own thread pool and registers the same pybind11 types.
"""
import importlib
import os

LEVELS = ("baseline", "avx2", "avx512", "native")  # lowest first
ENVIRONMENT_VARIABLE = "MULTIDRAFT_ISA"


def built_levels():
    """The levels this installation has a core for, lowest first."""
    here = os.path.dirname(__file__)
    return [level for level in LEVELS if os.path.isdir(os.path.join(here, level))]


def runnable_levels():
    """The built levels that this CPU and OS run, lowest first."""
    built = built_levels()
    if built == ["native"]:  # compiled for the building machine, which is this one
        return built
    from ._probe import supported_levels

    supported = supported_levels()
    return [level for level in built if level in supported]


def load_core():
    """Import and return the core for ``MULTIDRAFT_ISA`` if set, else the highest runnable level."""
    runnable = runnable_levels()
    if not runnable:
        raise ImportError(f"multidraft: no compiled core in {os.path.dirname(__file__)}; reinstall the package")
    requested = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if requested and requested not in runnable:
        raise ValueError(
            f"{ENVIRONMENT_VARIABLE}={requested!r}: this installation runs {', '.join(runnable)} on this CPU "
            f"(built: {', '.join(built_levels())}); unset it to choose automatically"
        )
    return importlib.import_module(f"{__name__}.{requested or runnable[-1]}._core")
