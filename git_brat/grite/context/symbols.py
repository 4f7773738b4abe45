"""The symbols a file defines, parsed with tree-sitter's packaged grammars (the `context` extra).

Only the outline is read: the top level and the bodies of classes, impls, traits, modules and
namespaces, never a function's body, so a file costs its parse and a walk of a few hundred
nodes. Each language is a table (node type -> what it defines and where its name is), not code.
tree-sitter and the grammars are imported here only, when a file is parsed.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from git_brat.errors import UsageError

INSTALL_HINT = "pip install 'git-brat[context]'"
NAME_MAX = 200        # characters of a symbol's name kept (a generated name can be any length)
DEPTH_MAX = 16        # nested bodies walked (namespaces in classes in modules ...)
SYMBOLS_MAX = 20_000  # symbols kept of one file


class Symbol(NamedTuple):
    name: str
    kind: str       # function, method, class, struct, interface, type, enum, trait, ...
    line: int       # 1-based first line
    end: int        # 1-based last line
    parent: str     # the class, impl, trait or namespace it is defined in ("" at the top)


class Def(NamedTuple):
    kind: str
    name: str = "name"     # the field holding its name
    body: str = ""         # the field holding the body whose definitions are its members


# What each node type defines, per grammar; WRAPPERS are walked through (their children are
# at the same level: an export, a decorator, a declaration of several names).
_PY = {"function_definition": Def("function"), "class_definition": Def("class", body="body"),
       "assignment": Def("variable", name="left")}
_JS = {"function_declaration": Def("function"), "generator_function_declaration": Def("function"),
       "class_declaration": Def("class", body="body"), "class": Def("class", body="body"),
       "method_definition": Def("method"), "variable_declarator": Def("variable")}
_TS = {**_JS, "abstract_class_declaration": Def("class", body="body"),
       "interface_declaration": Def("interface"), "type_alias_declaration": Def("type"),
       "enum_declaration": Def("enum"), "function_signature": Def("function"),
       "abstract_method_signature": Def("method"), "internal_module": Def("namespace", body="body"),
       "module": Def("namespace", body="body")}
_GO = {"function_declaration": Def("function"), "method_declaration": Def("method"),
       "type_spec": Def("type"), "type_alias": Def("type"), "const_spec": Def("constant"),
       "var_spec": Def("variable")}
_RUST = {"function_item": Def("function"), "function_signature_item": Def("function"),
         "struct_item": Def("struct"), "enum_item": Def("enum"), "union_item": Def("union"),
         "trait_item": Def("trait", body="body"), "type_item": Def("type"),
         "const_item": Def("constant"), "static_item": Def("static"),
         "mod_item": Def("module", body="body"), "macro_definition": Def("macro")}
WRAPPERS = frozenset({
    "decorated_definition", "expression_statement", "block", "export_statement",
    "lexical_declaration", "variable_declaration", "ambient_declaration", "class_body",
    "statement_block", "type_declaration", "const_declaration", "var_declaration",
    "declaration_list", "impl_item"})
# Where a member's parent is named otherwise than by a definition: Rust's impl, Go's receiver.
_OWNER_FIELD = {"impl_item": "type", "method_declaration": "receiver"}
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function",
                              "generator_function"})
_CONTAINERS = frozenset({"class", "struct", "interface", "trait", "impl"})   # members are methods


class Language(NamedTuple):
    name: str
    module: str      # the grammar's Python package
    function: str    # its function returning the language
    defs: dict


LANGUAGES = {
    "python": Language("python", "tree_sitter_python", "language", _PY),
    "javascript": Language("javascript", "tree_sitter_javascript", "language", _JS),
    "typescript": Language("typescript", "tree_sitter_typescript", "language_typescript", _TS),
    "tsx": Language("tsx", "tree_sitter_typescript", "language_tsx", _TS),
    "go": Language("go", "tree_sitter_go", "language", _GO),
    "rust": Language("rust", "tree_sitter_rust", "language", _RUST),
}
EXTENSIONS = {".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
              ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript",
              ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx", ".go": "go",
              ".rs": "rust"}


def language_of(path: str) -> str | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot > path.rfind("/") else None


def grammar_versions() -> str:
    """The binding's and each grammar's version: the index is a function of these and the
    tree, so a change of any one re-parses everything."""
    from importlib import metadata
    names = ["tree-sitter"] + sorted({lang.module.replace("_", "-") for lang in LANGUAGES.values()})
    out = []
    for name in names:
        try:
            out.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}=absent")
    return " ".join(out)


class Parsers:
    """One tree-sitter parser per language, made when first needed."""

    def __init__(self):
        try:
            self._ts = importlib.import_module("tree_sitter")
        except ImportError:
            raise UsageError(f"the code context index needs tree-sitter: {INSTALL_HINT}")
        self._parsers: dict[str, object] = {}

    def parser(self, lang: str):
        found = self._parsers.get(lang)
        if found is None:
            spec = LANGUAGES[lang]
            try:
                grammar = importlib.import_module(spec.module)
            except ImportError:
                raise UsageError(f"the code context index needs the {spec.name} grammar "
                                 f"({spec.module.replace('_', '-')}): {INSTALL_HINT}")
            found = self._parsers[lang] = self._ts.Parser(
                self._ts.Language(getattr(grammar, spec.function)()))
        return found

    def symbols(self, lang: str, source: bytes) -> list[Symbol]:
        root = self.parser(lang).parse(source).root_node
        out: list[Symbol] = []
        _walk(root, LANGUAGES[lang].defs, "", "", out, 0)
        return out


def _walk(node, defs: dict, parent: str, parent_kind: str, out: list[Symbol], depth: int) -> None:
    if depth > DEPTH_MAX:
        return
    for child in node.named_children:
        if len(out) >= SYMBOLS_MAX:
            return
        kind = child.type
        spec = defs.get(kind)
        if spec is not None:
            _define(child, spec, defs, parent, parent_kind, out, depth)
        elif kind in WRAPPERS:
            owner_field = _OWNER_FIELD.get(kind)
            owner = _type_name(child.child_by_field_name(owner_field)) if owner_field else ""
            _walk(child, defs, owner or parent, "impl" if owner else parent_kind, out, depth + 1)


def _define(node, spec: Def, defs: dict, parent: str, parent_kind: str, out: list[Symbol],
            depth: int) -> None:
    kind = spec.kind
    if kind == "function" and parent_kind in _CONTAINERS:
        kind = "method"
    elif kind == "variable" and getattr(node.child_by_field_name("value"), "type",
                                        None) in _FUNCTION_VALUES:
        kind = "function"   # const f = () => ...
    owner_field = _OWNER_FIELD.get(node.type)
    if owner_field:   # a Go method: its receiver's type is its parent
        parent = _type_name(node.child_by_field_name(owner_field)) or parent
    line, end = node.start_point[0] + 1, node.end_point[0] + 1
    for name_node in node.children_by_field_name(spec.name):
        if name_node.type not in ("identifier", "type_identifier", "property_identifier",
                                  "field_identifier", "private_property_identifier"):
            continue   # a destructuring pattern, an attribute: no one name
        name = _text(name_node)
        if name:
            out.append(Symbol(name, kind, line, end, parent))
    if spec.body:
        body = node.child_by_field_name(spec.body)
        names = node.children_by_field_name(spec.name)
        if body is not None:
            _walk(body, defs, _text(names[0]) if names else parent, spec.kind, out, depth + 1)


def _type_name(node, depth: int = 0) -> str:
    """The first type name under a node (`S` of `impl<T> Foo for S<T>`, of `(s *S)`)."""
    if node is None or depth > DEPTH_MAX:
        return ""
    if node.type == "type_identifier":
        return _text(node) or ""
    inner = node.child_by_field_name("type")
    if inner is not None:
        return _type_name(inner, depth + 1)
    for child in node.named_children:
        found = _type_name(child, depth + 1)
        if found:
            return found
    return ""


def _text(node) -> str | None:
    if node is None:
        return None
    return node.text[:NAME_MAX * 4].decode("utf-8", "replace")[:NAME_MAX]
