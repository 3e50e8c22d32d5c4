#!/usr/bin/env python3
"""Extracts the public symbol graphs of the named modules from the package's debug build, as
`swift package generate-documentation` does, without building anything again: each module's
`swift-symbolgraph-extract` gets the search paths and C module maps its compile command had in
SwiftPM's build plan (BUILD_DIR/debug.yaml, the plan of the last build). Writes
OUTPUT_DIR/<module>/<module>[@Other].symbols.json, which `docc convert` reads.

usage: symbol-graphs.py BUILD_DIR OUTPUT_DIR MODULE...
"""
import json
import os
import shutil
import subprocess
import sys


def compile_arguments(plan, module):
    """The argument list of the command that compiles `module` in the build plan."""
    needle = '"-module-name","%s",' % module
    for line in plan.splitlines():
        if needle in line and '"-emit-module"' in line:
            start = line.index("[")
            return json.loads(line[start:])
    return None


def extract_arguments(arguments):
    """What swift-symbolgraph-extract needs of a compile command: the target, the module search
    paths, the module cache and every argument passed on to Clang (C module maps and includes)."""
    kept = []
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in ("-target", "-I", "-F", "-Xcc", "-module-cache-path", "-sdk") and index + 1 < len(arguments):
            kept += [argument, arguments[index + 1]]
            index += 2
            continue
        index += 1
    return kept


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir, output_dir, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
    plan_path = os.path.join(build_dir, "debug.yaml")
    try:
        with open(plan_path) as plan_file:
            plan = plan_file.read()
    except OSError as error:
        print(f"error: no build plan at {plan_path} ({error.strerror}): build the package first", file=sys.stderr)
        return 1
    extractor = shutil.which("swift-symbolgraph-extract")
    if extractor is None:
        print("error: swift-symbolgraph-extract is not on PATH (it comes with the Swift toolchain)", file=sys.stderr)
        return 1
    for module in modules:
        arguments = compile_arguments(plan, module)
        if arguments is None:
            print(f"error: {plan_path} has no compile command for {module}", file=sys.stderr)
            return 1
        out = os.path.join(output_dir, module)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        command = [extractor, "-module-name", module] + extract_arguments(arguments) + [
            "-minimum-access-level", "public", "-skip-synthesized-members", "-emit-extension-block-symbols",
            "-output-dir", out]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"error: extracting the symbols of {module} failed:\n{result.stderr}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
