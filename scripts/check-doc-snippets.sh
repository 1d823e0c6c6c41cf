#!/usr/bin/env bash
# Fails when a documentation sample no longer matches the test file that runs it (the README's
# example, ReadmeExampleTests; docs/testing.md's view-model tests, DocsTestingExample), or when
# Tests/DocSnippetTests/Generated, which compiles every Swift block of the documentation, differs
# from the documents or a Package.swift block does not evaluate (scripts/doc-snippets.py --check;
# `make snippets` regenerates). SWIFT names the toolchain's `swift` (default: swift).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import re, sys
doc = open("docs/testing.md").read()
block = [b for b in re.findall(r"```swift\n(.*?)```", doc, re.S) if "struct LoginViewModelTests" in b][0]
test = open("Tests/LoginKitMocksTests/DocsTestingExample.swift").read()
if block not in test:
    sys.exit("docs/testing.md's example differs from Tests/LoginKitMocksTests/DocsTestingExample.swift")
readme = open("README.md").read()
snippet = re.search(r"import LoginKit\n\n(.*?)```", readme, re.S).group(1).strip().splitlines()
example = open("Tests/LoginKitTests/ReadmeExampleTests.swift").read()
missing = [line for line in snippet if line.strip() and line.strip() not in example]
if missing:
    sys.exit("README example lines missing from ReadmeExampleTests.swift: %s" % missing)
print("doc snippets match their tests")
PY
python3 scripts/doc-snippets.py --check
