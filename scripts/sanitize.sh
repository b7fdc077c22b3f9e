#!/usr/bin/env bash
# `make sanitize` (docs/sanitizers.md): the C++ core built with sanitizers and the tests run on it.
#
#   scripts/sanitize.sh [address] [thread]     (default: both, in this order)
#
#   address  AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite (tests/).
#   thread   ThreadSanitizer: every test file that starts threads (threading, ThreadPoolExecutor,
#            set_num_threads) and tests/core/test_threads.py.
#
# Each kind builds one native core into build/sanitize-<kind> and stages a copy of python/ there
# whose _isa/native holds it; the tests import that copy through PYTHONPATH (the installed package
# is never touched). The interpreter is not instrumented, so the sanitizer's runtime is preloaded.
# Any report stops the run with a non-zero status. Environment: PY (the Python with the package's
# test dependencies, default .venv/bin/python), JOBS (compile jobs, default: the CPU count),
# PYTEST_ARGS (extra pytest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # absolute: CMake resolves a relative one elsewhere
JOBS=${JOBS:-$(nproc)}
read -r -a EXTRA <<< "${PYTEST_ARGS:-}"
KINDS=("$@")
[ ${#KINDS[@]} -gt 0 ] || KINDS=(address thread)

seconds() { date +%s; }

# build KIND SANITIZERS: configure and compile the native core and the ISA probe (which
# tests/core/test_isa.py imports; it is not instrumented: the package never loads it for a
# native-only build).
build() {
    local dir=build/sanitize-$1
    cmake -S . -B "$dir" -DMULTIDRAFT_NATIVE=ON -DMULTIDRAFT_SANITIZE="$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
    cmake --build "$dir" -j "$JOBS" --target multidraft_core_native multidraft_isa_probe
}

# stage KIND: build/sanitize-KIND/python, a copy of python/ whose only core is the sanitized one.
stage() {
    local dir=build/sanitize-$1 isa
    rm -rf "$dir/python"
    cp -r python "$dir/python"
    isa=$dir/python/multidraft/_isa
    find "$dir/python" -name __pycache__ -prune -exec rm -rf {} +
    find "$isa" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
    rm -f "$isa"/_probe*.so
    mkdir -p "$isa/native"
    cp "$dir"/native/_core*.so "$isa/native/"
    cp "$dir"/_probe*.so "$isa/"
}

# check_staged KIND [LAUNCHER...]: the staged package and its sanitized core are the ones imported
# (under the preloaded runtime: a report at import stops here).
check_staged() {
    local dir=$ROOT/build/sanitize-$1
    shift
    "$@" "$PY" -c "
import multidraft
core = multidraft._core.__file__
assert multidraft.__file__.startswith('$dir/python/'), multidraft.__file__
assert core.startswith('$dir/python/multidraft/_isa/native/'), core
print('sanitized core:', core)"
}

# ThreadSanitizer maps its shadow memory at fixed addresses; with many bits of mmap randomisation
# (vm.mmap_rnd_bits > 28 on recent kernels) the GCC 12 runtime fails at start ("unexpected memory
# mapping"), which `setarch -R` (no address randomisation for this process tree) avoids.
tsan_launcher() {
    if LD_PRELOAD="$1" "$PY" -c pass 2>/dev/null; then
        return 0
    fi
    if LD_PRELOAD="$1" setarch "$(uname -m)" -R "$PY" -c pass; then
        echo "setarch $(uname -m) -R"
        return 0
    fi
    echo "ThreadSanitizer does not start here, even under setarch -R" >&2
    return 1
}

run_address() {
    local asan ubsan
    asan=$(g++ -print-file-name=libasan.so)
    ubsan=$(g++ -print-file-name=libubsan.so)
    # detect_leaks=0: CPython frees neither its interned objects nor its modules at exit.
    # PYTHONMALLOC=malloc: Python objects come from malloc, so ASan sees their bounds too.
    # MULTIDRAFT_REQUIRE_ALL_TESTS=0: a native-only build has one core, which the ISA test of
    # several cores skips.
    export LD_PRELOAD="$asan:$ubsan" PYTHONMALLOC=malloc MULTIDRAFT_REQUIRE_ALL_TESTS=0
    export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:strict_init_order=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86
    export PYTHONPATH=$ROOT/build/sanitize-address/python${PYTHONPATH:+:$PYTHONPATH}
    check_staged address
    "$PY" -m pytest -q -p no:cacheprovider tests "${EXTRA[@]}"
}

run_thread() {
    local tsan launcher files
    tsan=$(g++ -print-file-name=libtsan.so)
    launcher=$(tsan_launcher "$tsan")
    # Every test file that starts Python threads or sets a thread count; test_threads.py always.
    mapfile -t files < <({ echo tests/core/test_threads.py;
                           grep -rlE --include='test_*.py' 'threading|ThreadPoolExecutor|set_num_threads' tests; } | sort -u)
    export LD_PRELOAD=$tsan MULTIDRAFT_REQUIRE_ALL_TESTS=0
    export TSAN_OPTIONS="halt_on_error=1:exitcode=86:second_deadlock_stack=1:suppressions=$ROOT/scripts/sanitize/tsan.supp"
    export PYTHONPATH=$ROOT/build/sanitize-thread/python${PYTHONPATH:+:$PYTHONPATH}
    [ -z "$launcher" ] || echo "ThreadSanitizer needs: $launcher"
    # shellcheck disable=SC2086 # the launcher is a command and its arguments, or nothing
    check_staged thread $launcher
    # shellcheck disable=SC2086
    $launcher "$PY" -m pytest -q -p no:cacheprovider "${files[@]}" "${EXTRA[@]}"
}

for kind in "${KINDS[@]}"; do
    case $kind in
        address) sanitizers="address;undefined" ;;
        thread) sanitizers=thread ;;
        *) echo "unknown kind '$kind' (address, thread)" >&2; exit 2 ;;
    esac
    start=$(seconds)
    build "$kind" "$sanitizers"
    stage "$kind"
    built=$(seconds)
    ( "run_$kind" )
    echo "sanitize $kind: build $((built - start)) s, tests $(($(seconds) - built)) s"
done
