#!/usr/bin/env bash
# taco, the peer the paper measures against, for bench/run.py: its command
# line tool built from source (pinned commit) into bench/.taco. Not part of
# bench/setup.sh: it needs the source (a clone, 9 MB) and a C++ build of
# several minutes. run.py uses bench/.taco/bin/taco when it exists and
# leaves the taco column out otherwise.
#
#   bench/setup_taco.sh              # clones https://github.com/tensor-compiler/taco
#   TACO_GIT=/path/to/taco.git bench/setup_taco.sh   # any clone or mirror of it
#
# cmake comes from PyPI into bench/.venv (run bench/setup.sh first).
set -euo pipefail
cd "$(dirname "$0")"
src=.taco/src
[ -x .venv/bin/python ] || { echo "error: run bench/setup.sh first (bench/.venv)" >&2; exit 1; }
.venv/bin/pip install -q cmake
if [ ! -d "$src/.git" ]; then
  mkdir -p .taco
  git clone -q "${TACO_GIT:-https://github.com/tensor-compiler/taco}" "$src"
fi
git -C "$src" checkout -q "$(git -C "$src" rev-parse --verify "${TACO_COMMIT:-2b8ece4c}^{commit}")"
# Two fixes to taco's timing path (`-time`) at this commit:
# - it compiles the printed kernel again, shims included twice (a C error),
#   and drops `-c`: it is made to compile the scheduled statement itself,
#   as `Tensor::compile` does;
# - `compute()` returns at once when the result is up to date, so every
#   timed run after the first timed nothing: it now always runs the kernel.
git -C "$src" checkout -q -- tools/taco.cpp src/tensor.cpp
sed -i 's|tensor.compileSource(util::toString(kernel));|tensor.compile(stmt, computeWithAssemble);|' "$src/tools/taco.cpp"
grep -q 'tensor.compile(stmt, computeWithAssemble);' "$src/tools/taco.cpp"
perl -0pi -e 's/(void TensorBase::compute\(\) \{\n[^\n]*\n)  if \(!needsCompute\(\)\) \{\n    return;\n  \}\n/$1/' "$src/src/tensor.cpp"
! grep -A3 '^void TensorBase::compute() {' "$src/src/tensor.cpp" | grep -q 'needsCompute()'
mkdir -p .taco/build
# taco's CMakeLists stops when pybind11's is missing, though only the Python
# bindings (off) include it: a placeholder stands in for the submodule.
[ -e "$src/python_bindings/pybind11/CMakeLists.txt" ] || {
  mkdir -p "$src/python_bindings/pybind11"
  echo "# placeholder: the Python bindings are not built" > "$src/python_bindings/pybind11/CMakeLists.txt"
}
# CMake 4 refuses projects that ask for a version before 3.5 (taco asks
# for 3.4) unless told the oldest policy version to assume. The submodules
# (pybind11, bats) serve the Python bindings and shell tests only.
.venv/bin/cmake -S "$src" -B .taco/build -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DGIT_SUBMODULE=OFF >/dev/null
.venv/bin/cmake --build .taco/build --target taco-tool -j "$(nproc)"
mkdir -p .taco/bin
ln -sf ../build/bin/taco .taco/bin/taco
echo "taco: bench/.taco/bin/taco ($(git -C "$src" rev-parse --short HEAD))"
