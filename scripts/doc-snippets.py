#!/usr/bin/env python3
"""Every Swift block of the documentation compiles: each ```swift block of README.md, docs/*.md and
the DocC catalogs (Sources/*/*.docc, Mocks/*.docc) becomes a source file of the DocSnippetTests test
target, Tests/DocSnippetTests/Generated/<document>_<n>.swift (n counts the document's ```swift
blocks from 1), which `swift build --build-tests` compiles with the package's warnings-as-errors
settings. Nothing runs the blocks.

    scripts/doc-snippets.py          writes Tests/DocSnippetTests/Generated (`make snippets`)
    scripts/doc-snippets.py --check  fails, naming the document and the block, when the committed
                                     files differ from what the documents give or a manifest block
                                     does not evaluate (`make test`, through check-doc-snippets.sh)

How a block becomes Swift:
- its imports go to the top of the file;
- declarations at its top level (struct, class, enum, actor, protocol, typealias, func, extension)
  stay at file scope, made `private` (two documents may declare the same name), without Swift
  Testing's @Test and @Suite attributes (the blocks are compiled, never run);
- its statements go into a private `async throws` function that nothing calls, and every
  `let`/`var` they bind is followed by `_ = name`: a block may bind a value only to show it.

HTML comments right before the block's opening fence (GitHub and DocC do not show them) say more:

    <!-- snippet-context: SWIFT -->            SWIFT goes before the block's statements: the names
                                               the block uses without declaring them. Its imports
                                               go to the top; `import A; import B; let x = 1` on
                                               one line works, and so do several lines.
    <!-- snippet-context file-scope: SWIFT --> SWIFT goes at file scope: types the block uses.
    <!-- snippet: main-actor -->               the statements' function is @MainActor.
    <!-- snippet: manifest -->                 the block is arguments of a Package.swift's
                                               `Package(name: "App", …)`: --check writes it into a
                                               scratch manifest (swift-tools-version 6.2) and
                                               evaluates it with `swift package dump-package`,
                                               which compiles the manifest and resolves nothing.
    <!-- snippet: skip REASON -->              not checked, for REASON: only for what neither way
                                               can check.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = Path("Tests/DocSnippetTests/Generated")
INDEX = "DocSnippetIndex.swift"
TOOLS_VERSION = "6.2"

DECLARATION_KEYWORDS = {"struct", "class", "enum", "actor", "protocol", "typealias", "func", "extension", "macro"}
MODIFIERS = {
    "public", "private", "fileprivate", "internal", "package", "open", "final", "static", "nonisolated",
    "indirect", "dynamic", "required", "convenience", "override", "mutating", "nonmutating", "lazy",
    "weak", "unowned", "distributed",
}
ACCESS = {"public", "private", "fileprivate", "internal", "package", "open"}
TYPE_KEYWORDS = re.compile(r"\b(struct|class|enum|actor|extension|protocol)\b")
BINDING = re.compile(r"^(\s*)(?:let|var)\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=")
FENCE_OPEN = re.compile(r"^(\s*)```swift\s*$")
FENCE_CLOSE = re.compile(r"^\s*```\s*$")
CONTEXT_IMPORT = re.compile(  # `@attribute import Module`, then `;` or the end of the line (or a comment)
    r"\s*((?:@[A-Za-z_][A-Za-z0-9_]*(?:\([^)]*\))?\s+)*import\s+[A-Za-z_][A-Za-z0-9_.]*)\s*(?:;\s*|(?://.*)?$)")


class DocumentError(Exception):
    pass


def documents():
    """The documents whose Swift blocks are checked, relative to the repository."""
    found = [Path("README.md")]
    found += sorted(path.relative_to(ROOT) for path in (ROOT / "docs").glob("*.md"))
    for catalogs in ("Sources/*/*.docc", "Mocks/*.docc"):
        for catalog in sorted(ROOT.glob(catalogs)):
            found += sorted(path.relative_to(ROOT) for path in catalog.rglob("*.md"))
    return [path for path in found if (ROOT / path).is_file()]


def document_name(path):
    """README.md → README, docs/server-side.md → docs_server_side,
    Sources/LoginKit/LoginKit.docc/Testing.md → LoginKit_docc_Testing."""
    parts = list(path.with_suffix("").parts)
    for index, part in enumerate(parts):
        if part.endswith(".docc"):
            parts = [part[: -len(".docc")], "docc"] + parts[index + 1:]
            break
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(parts))


# MARK: Reading the documents

class Block:
    def __init__(self, document, number, line, code):
        self.document = document      # Path, relative to the repository
        self.number = number          # 1-based, among the document's ```swift blocks
        self.line = line              # the opening fence's line, 1-based
        self.code = code              # the block's text, its common indentation removed
        self.kind = "compiled"        # compiled, manifest or skipped
        self.reason = ""              # why it is skipped
        self.main_actor = False
        self.context = []             # statements before the block's
        self.file_context = []        # declarations at file scope

    @property
    def where(self):
        return f"{self.document}, Swift block {self.number} (line {self.line})"

    @property
    def file_name(self):
        return f"{document_name(self.document)}_{self.number}.swift"


def read_blocks(path):
    lines = (ROOT / path).read_text(encoding="utf-8").split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        opening = FENCE_OPEN.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening.group(1))
        end = index + 1
        while end < len(lines) and not FENCE_CLOSE.match(lines[end]):
            end += 1
        if end == len(lines):
            raise DocumentError(f"{path}:{index + 1}: the ```swift block is never closed")
        code = [line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in lines[index + 1:end]]
        block = Block(path, len(blocks) + 1, index + 1, "\n".join(code))
        for directive, text in directives_before(lines, index, path):
            apply_directive(block, directive, text)
        if block.kind != "compiled" and (block.context or block.file_context or block.main_actor):
            raise DocumentError(f"{block.where}: a {block.kind} block takes no snippet-context or main-actor")
        blocks.append(block)
        index = end + 1
    return blocks


def directives_before(lines, fence, path):
    """The snippet comments right above line `fence` (blank lines between them allowed), in order."""
    found = []
    index = fence - 1
    while index >= 0:
        if lines[index].strip() == "":
            index -= 1
            continue
        if not lines[index].rstrip().endswith("-->"):
            break
        start = index
        while start >= 0 and "<!--" not in lines[start]:
            start -= 1
        if start < 0:
            break
        text = "\n".join(lines[start:index + 1]).strip()
        match = re.fullmatch(r"<!--\s*(snippet(?:-context(?:\s+file-scope)?)?)\s*:(.*?)-->", text, re.S)
        if not match and re.match(r"<!--\s*snippet", text):
            raise DocumentError(f"{path}:{start + 1}: unknown snippet comment (snippet:, snippet-context:, "
                                "snippet-context file-scope:)")
        if not match or not lines[start].lstrip().startswith("<!--"):
            break
        found.append((match.group(1), match.group(2), f"{path}:{start + 1}"))
        index = start - 1
    return [(directive, (text, where)) for directive, text, where in reversed(found)]


def apply_directive(block, directive, text_and_where):
    text, where = text_and_where
    if directive == "snippet":
        words = text.strip().split(None, 1)
        option = words[0] if words else ""
        if option == "manifest":
            block.kind = "manifest"
        elif option == "main-actor":
            block.main_actor = True
        elif option == "skip":
            if len(words) < 2:
                raise DocumentError(f"{where}: `<!-- snippet: skip REASON -->` needs its reason")
            block.kind = "skipped"
            block.reason = " ".join(words[1].split())
        else:
            raise DocumentError(f"{where}: unknown `<!-- snippet: {option} -->` (manifest, main-actor, skip REASON)")
    else:
        code = dedent(text.strip("\n"))
        if directive == "snippet-context":
            block.context.append(code)
        else:
            block.file_context.append(code)


def dedent(text):
    lines = text.split("\n")
    widths = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(widths) if widths else 0
    return "\n".join(line[cut:] if line.strip() else "" for line in lines).strip()


# MARK: Swift text

def mask(text):
    """`text` with the contents of string literals and comments replaced by spaces (newlines and
    the quotes kept), so that brackets and keywords can be counted on it."""
    out = list(text)
    length = len(text)

    def blank(start, end):
        for position in range(start, min(end, length)):
            if out[position] != "\n":
                out[position] = " "

    opening = re.compile(r'(#*)("""|")')
    stack = [["code", None]]  # code (with its parenthesis depth inside an interpolation) or string
    index = 0
    while index < length:
        top = stack[-1]
        if top[0] == "code":
            inside = len(stack) > 1
            if text.startswith("//", index):
                end = text.find("\n", index)
                end = length if end < 0 else end
                blank(index, end)
                index = end
                continue
            if text.startswith("/*", index):
                depth, end = 1, index + 2
                while end < length and depth:
                    if text.startswith("/*", end):
                        depth, end = depth + 1, end + 2
                    elif text.startswith("*/", end):
                        depth, end = depth - 1, end + 2
                    else:
                        end += 1
                blank(index, end)
                index = end
                continue
            quote = opening.match(text, index)
            if quote:
                stack.append(["string", len(quote.group(1)), quote.group(2) == '"""'])
                if inside:
                    blank(index, quote.end())
                index = quote.end()
                continue
            character = text[index]
            if top[1] is not None:
                if character == "(":
                    top[1] += 1
                elif character == ")":
                    top[1] -= 1
                    if top[1] == 0:
                        stack.pop()
            if inside:
                blank(index, index + 1)
            index += 1
        else:
            _, hashes, multiline = top
            escape = "\\" + "#" * hashes
            close = ('"""' if multiline else '"') + "#" * hashes
            if text.startswith(escape, index):
                after = index + len(escape)
                if after < length and text[after] == "(":
                    blank(index, after + 1)
                    stack.append(["code", 1])
                    index = after + 1
                    continue
                blank(index, after + 1)
                index = after + 1
                continue
            if text.startswith(close, index):
                stack.pop()
                if len(stack) > 1:
                    blank(index, index + len(close))
                index += len(close)
                continue
            if not multiline and text[index] == "\n":
                stack.pop()  # an unterminated literal ends with its line
                index += 1
                continue
            blank(index, index + 1)
            index += 1
    return "".join(out)


def skip_attributes(masked, position):
    """The position after the attributes (`@Name`, `@Name(…)`) and spaces starting at `position`."""
    while True:
        attribute = re.compile(r"\s*@[A-Za-z_][A-Za-z0-9_.]*").match(masked, position)
        if not attribute:
            return re.compile(r"\s*").match(masked, position).end()
        position = attribute.end()
        if position < len(masked) and masked[position] == "(":
            position = matching_parenthesis(masked, position)


def matching_parenthesis(masked, position):
    """The position after the `)` matching the `(` at `position`."""
    depth = 0
    for index in range(position, len(masked)):
        if masked[index] == "(":
            depth += 1
        elif masked[index] == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(masked)


def declaration_keyword(masked_line):
    """The first word of a line after its attributes and modifiers (`struct`, `func`, `import`,
    `let`, an identifier…), its position in the line, the position where the modifiers start, and
    whether one of them is an access level."""
    position = skip_attributes(masked_line, 0)
    modifiers_start = position
    has_access = False
    while True:
        word = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)").match(masked_line, position)
        if not word:
            return None, position, modifiers_start, has_access
        if word.group(1) in MODIFIERS:
            has_access = has_access or word.group(1) in ACCESS
            position = word.end()
            if position < len(masked_line) and masked_line[position] == "(":
                position = matching_parenthesis(masked_line, position)
            position = re.compile(r"\s*").match(masked_line, position).end()
            continue
        return word.group(1), position, modifiers_start, has_access


def is_attribute_only(masked_line):
    stripped = masked_line.strip()
    return stripped.startswith("@") and skip_attributes(stripped, 0) == len(stripped)


def continues(masked_lines, index):
    """Whether the statement on line `index` goes on in the next line (a trailing operator, or a
    next line that starts with `.`, an operator, `else` or `catch`)."""
    code = masked_lines[index].rstrip()
    if code and code[-1] in "=,([.+-*/&|?:" and not code.endswith("->"):
        return True
    for following in masked_lines[index + 1:]:
        stripped = following.strip()
        if stripped:
            return bool(re.match(r"(\.[A-Za-z_]|&&|\|\||\?\?|[?:+*/%=<>-]|else\b|catch\b)", stripped))
    return False


def bracket_changes(masked_line, stack):
    """Applies the line's brackets to `stack` (entries: `(`, `[`, `{code`, `{type`); returns the
    smallest stack length reached within the line."""
    lowest = len(stack)
    for position, character in enumerate(masked_line):
        if character in "([":
            stack.append(character)
        elif character == "{":
            stack.append("{type" if TYPE_KEYWORDS.search(masked_line[:position]) else "{code")
        elif character in ")]}":
            if stack:
                stack.pop()
            lowest = min(lowest, len(stack))
    return lowest


def split_items(code, where):
    """The block's top-level items: (imports, [["declaration" | "statement", lines]]); blank and
    comment lines go with the item below them."""
    lines = code.split("\n")
    masked_lines = mask(code).split("\n")
    imports, items, pending = [], [], []
    current = None
    stack = []
    for index, (line, masked_line) in enumerate(zip(lines, masked_lines)):
        bracket_changes(masked_line, stack)
        if current is not None:
            current[1].append(line)
            if not stack and not continues(masked_lines, index):
                current = None
            continue
        if masked_line.strip() == "" or is_attribute_only(masked_line):
            pending.append(line)
            continue
        keyword = declaration_keyword(masked_line)[0]
        if keyword == "import":
            imports.append(normalized_import(line, masked_line))
            pending = [text for text in pending if text.strip()]  # comments above an import stay
            continue
        kind = "declaration" if keyword in DECLARATION_KEYWORDS else "statement"
        current = [kind, pending + [line]]
        pending = []
        items.append(current)
        if not stack and not continues(masked_lines, index):
            current = None
    if stack:
        raise DocumentError(f"{where}: unbalanced brackets")
    if pending and any(text.strip() for text in pending):
        if items:
            items[-1][1].extend(pending)
        else:
            items.append(["statement", pending])
    return imports, items


def normalized_import(line, masked_line):
    """An import line without its access level (imports here serve private code only) or comment."""
    keyword, position, modifiers_start, _ = declaration_keyword(masked_line)
    attributes = line[:modifiers_start].strip()
    rest = line[position:len(masked_line.rstrip())].strip()
    return (attributes + " " + rest).strip()


def split_context(text, where):
    """A context's imports (also `import A; import B; rest` on one line) and its remaining code."""
    imports, rest = [], []
    for line in text.split("\n"):
        while True:
            match = CONTEXT_IMPORT.match(line)
            if not match:
                break
            imports.append(match.group(1).strip())
            line = line[match.end():]
        if line.strip():
            rest.append(line)
    return imports, "\n".join(rest)


def without_test_attributes(text):
    """`text` without Swift Testing's @Test and @Suite attributes (with their arguments); a line
    that held only such an attribute goes."""
    masked = mask(text)
    spans = []
    for match in re.finditer(r"(?<![A-Za-z0-9_])@(Test|Suite)(?![A-Za-z0-9_])", masked):
        end = match.end()
        after = re.compile(r"\s*").match(masked, end).end()
        if after < len(masked) and masked[after] == "(":
            end = matching_parenthesis(masked, after)
        end = re.compile(r"[ \t]*").match(masked, end).end()
        line_start = masked.rfind("\n", 0, match.start()) + 1
        line_end = masked.find("\n", end)
        line_end = len(masked) if line_end < 0 else line_end
        if masked[line_start:match.start()].strip() == "" and masked[end:line_end].strip() == "":
            spans.append((line_start, min(line_end + 1, len(masked))))
        else:
            spans.append((match.start(), end))
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text


def made_private(text):
    """A file-scope declaration, `private` unless it names an access level (extensions stay as
    they are: they may declare conformances)."""
    lines = text.split("\n")
    masked_lines = mask(text).split("\n")
    for index, masked_line in enumerate(masked_lines):
        if masked_line.strip() == "" or is_attribute_only(masked_line):
            continue
        keyword, _, modifiers_start, has_access = declaration_keyword(masked_line)
        if keyword in (DECLARATION_KEYWORDS | {"let", "var"}) - {"extension"} and not has_access:
            lines[index] = lines[index][:modifiers_start] + "private " + lines[index][modifiers_start:]
        break
    return "\n".join(lines)


def with_discards(text):
    """Statements with `_ = name` after each `let`/`var` statement in code (not in a type body)
    whose name is not mentioned later in its scope, and after every `var` statement (a variable
    that is only assigned to is not read)."""
    lines = text.split("\n")
    masked_lines = mask(text).split("\n")
    starts = []
    stack = []
    for masked_line in masked_lines:
        starts.append(list(stack))
        bracket_changes(masked_line, stack)
    insertions = {}
    for index, masked_line in enumerate(masked_lines):
        binding = BINDING.match(masked_line)
        if not binding or (starts[index] and starts[index][-1] != "{code"):
            continue
        bindings = [binding]
        if not re.search(r"[{(\[]", masked_line):  # `let a = 1; let b = 2`
            bindings += [more for more in map(BINDING.match, masked_line.split(";")[1:]) if more]
        depth = len(starts[index])
        for end in range(index, len(lines)):
            after = starts[end + 1] if end + 1 < len(lines) else stack
            if len(after) < depth or min_length(starts[end], masked_lines[end]) < depth:
                break
            if len(after) == depth and not continues(masked_lines, end):
                later = rest_of_scope(masked_lines, starts, end + 1, depth)
                for found in bindings:
                    name = found.group(2)
                    is_var = found.group(0).lstrip().startswith("var")
                    if is_var or not re.search(rf"(?<![A-Za-z0-9_.]){name}(?![A-Za-z0-9_])", later):
                        insertions.setdefault(end, []).append(f"{binding.group(1)}_ = {name}")
                break
    result = []
    for index, line in enumerate(lines):
        result.append(line)
        result.extend(insertions.get(index, []))
    return "\n".join(result)


def rest_of_scope(masked_lines, starts, first, depth):
    """The masked text from line `first` to the end of the scope at `depth`."""
    text = []
    for index in range(first, len(masked_lines)):
        if min_length(starts[index], masked_lines[index]) < depth:
            text.append(masked_lines[index].split("}")[0])
            break
        text.append(masked_lines[index])
    return "\n".join(text)


def min_length(start_stack, masked_line):
    return bracket_changes(masked_line, list(start_stack))


def indented(text, prefix="    "):
    return "\n".join(prefix + line if line.strip() else "" for line in text.split("\n"))


# MARK: Writing the files

def swift_file(block):
    imports, items = split_items(block.code, block.where)
    context_imports, contexts = [], []
    for text in block.context:
        found, rest = split_context(text, block.where)
        context_imports += found
        if rest.strip():
            contexts.append(rest)
    file_contexts = []
    for text in block.file_context:
        found, rest = split_context(text, block.where)
        context_imports += found
        if rest.strip():
            file_contexts.append(rest)
    declarations = [
        made_private(without_test_attributes("\n".join(lines).strip("\n")))
        for kind, lines in items if kind == "declaration"
    ]
    statements = "\n".join(line for kind, lines in items if kind == "statement" for line in lines).strip("\n")

    out = [
        f"// Generated by scripts/doc-snippets.py from {block.document}, Swift block {block.number}.",
        "// Edit the document, then run `make snippets`. `make test` compiles this file; nothing runs it.",
        "// swift-format-ignore-file",
    ]
    all_imports = sorted(set(imports + context_imports), key=lambda line: (line.split()[-1], line))
    if all_imports:
        out += [""] + all_imports
    for text in file_contexts:
        out += ["", "// The block's snippet-context (file scope):"]
        out += ["\n\n".join(file_scope_items(text, block.where))]
    if declarations:
        out += ["", "// The block's declarations:"]
        out += ["\n\n".join(declarations)]
    if statements or contexts:
        attribute = "@MainActor " if block.main_actor else ""
        body = []
        for text in contexts:
            body += ["// The block's snippet-context:", text]
        if statements:
            body += ["// The block:", statements]
        out += ["", f"{attribute}private func snippet_{document_name(block.document)}_{block.number}() async throws {{"]
        out += [indented(with_discards("\n".join(body))), "}"]
    return "\n".join(out) + "\n"


def file_scope_items(text, where):
    """A file-scope context's declarations, each made private on its own."""
    _, items = split_items(text, where)
    return [made_private("\n".join(lines).strip("\n")) for _, lines in items]


def index_file(blocks, scanned):
    out = [
        "// Generated by scripts/doc-snippets.py: `make snippets` rewrites it.",
        "// swift-format-ignore-file",
        "",
        "/// Every Swift block of the documents in `scannedDocuments`, in order, and how `make test` checks it.",
        "let generatedDocSnippets: [DocSnippet] = [",
    ]
    for block in blocks:
        if block.kind == "compiled":
            check = f".compiled({swift_string(block.file_name)})"
        elif block.kind == "manifest":
            check = ".manifest"
        else:
            check = f".skipped({swift_string(block.reason)})"
        document = swift_string(str(block.document))
        out.append(f"    DocSnippet(document: {document}, block: {block.number}, check: {check}),")
    out += [
        "]",
        "",
        "/// The documents whose Swift blocks scripts/doc-snippets.py reads.",
        "let scannedDocuments: [String] = [",
    ]
    out += [f"    {swift_string(str(path))}," for path in scanned]
    out += ["]", ""]
    return "\n".join(out)


def swift_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def expected_files():
    """(every block, {file name: contents}) as the documents give them."""
    scanned = documents()
    blocks = []
    for path in scanned:
        blocks += read_blocks(path)
    files = {block.file_name: swift_file(block) for block in blocks if block.kind == "compiled"}
    files[INDEX] = index_file(blocks, scanned)
    return blocks, files


def committed_files():
    directory = ROOT / GENERATED
    if not directory.is_dir():
        return {}
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.swift"))}


# MARK: Manifest blocks

def check_manifest(block, swift):
    """None when the block evaluates as arguments of `Package(name:…)`, else what SwiftPM said."""
    with tempfile.TemporaryDirectory(prefix="doc-snippet-manifest-") as scratch:
        manifest = (
            f"// swift-tools-version:{TOOLS_VERSION}\n"
            "import PackageDescription\n\n"
            "let package = Package(\n"
            '    name: "App",\n'
            f"{indented(block.code)}\n"
            ")\n"
        )
        Path(scratch, "Package.swift").write_text(manifest, encoding="utf-8")
        command = shlex.split(swift) + [
            "package", "--package-path", scratch, "--scratch-path", os.path.join(scratch, ".build"), "dump-package",
        ]
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            return result.stdout.strip() or f"swift package dump-package exited {result.returncode}"
    return None


# MARK: Main

def main(arguments):
    check = "--check" in arguments
    unknown = [argument for argument in arguments if argument != "--check"]
    if unknown:
        sys.exit("usage: scripts/doc-snippets.py [--check]")
    try:
        blocks, expected = expected_files()
    except DocumentError as error:
        sys.exit(f"doc-snippets: {error}")
    by_file = {block.file_name: block for block in blocks}
    committed = committed_files()
    if not check:
        directory = ROOT / GENERATED
        directory.mkdir(parents=True, exist_ok=True)
        for name in sorted(set(committed) - set(expected)):
            (directory / name).unlink()
        for name, text in sorted(expected.items()):
            if committed.get(name) != text:
                (directory / name).write_text(text, encoding="utf-8")
        compiled = sum(1 for block in blocks if block.kind == "compiled")
        print(f"doc-snippets: {compiled} Swift blocks written to {GENERATED}/ "
              f"({len(blocks) - compiled} others: manifest or skipped)")
        return

    failures = []
    for name in sorted(set(expected) | set(committed)):
        if expected.get(name) == committed.get(name):
            continue
        what = by_file[name].where if name in by_file else ("the list of blocks" if name == INDEX else "no block")
        if name not in committed:
            failures.append(f"{what}: {GENERATED / name} is missing")
        elif name not in expected:
            failures.append(f"{GENERATED / name} matches no block of the documents (one removed or renumbered)")
        else:
            failures.append(f"{what}: {GENERATED / name} differs from the document")
    swift = os.environ.get("SWIFT", "swift")
    for block in blocks:
        if block.kind == "manifest":
            error = check_manifest(block, swift)
            if error:
                failures.append(f"{block.where}: the Package.swift fragment does not evaluate:\n{indented(error)}")
    if failures:
        for failure in failures:
            print(f"doc-snippets: {failure}", file=sys.stderr)
        print("doc-snippets: fix the document (manifest blocks), then run `make snippets` and commit "
              f"{GENERATED}/", file=sys.stderr)
        sys.exit(1)
    manifests = sum(1 for block in blocks if block.kind == "manifest")
    skipped = sum(1 for block in blocks if block.kind == "skipped")
    print(f"doc-snippets: {len(blocks) - manifests - skipped} Swift blocks generated as committed, "
          f"{manifests} manifest blocks evaluate, {skipped} skipped")


if __name__ == "__main__":
    os.chdir(ROOT)
    main(sys.argv[1:])
