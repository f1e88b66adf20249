# SPDX-License-Identifier: Apache-2.0
"""CustomResourceDefinition schemas as kube-apiserver applies them to custom resources.

A CRD's openAPIV3Schema is a *structural* schema: kube-apiserver prunes the fields it does not
declare (unless x-kubernetes-preserve-unknown-fields says to keep them), fills in `default`s, then
validates types, enums, required fields, patterns, bounds and list types. This module does the same
on plain Python values, with the real server's field paths and wording, so that the fake API server
(fakekube.py) and the chart checks answer a custom resource as a real cluster would:

    obj, causes, pruned = crdschema.apply(schema, obj)

`causes` are (field, message) pairs (empty when valid), `pruned` the paths of dropped unknown
fields (the real server drops them and answers a `Warning` header). A null in a field that is
not nullable is dropped too (and defaulted when the schema has a default), as the server does. `check_crd(crd)` holds a CRD to
the rules kube-apiserver enforces on its own (name, one storage version, structural schemas, valid
defaults). Of the formats, date-time is checked; CEL rules (x-kubernetes-validations) are not
evaluated.
"""
import copy
import json
import re

# fields every object has, handled by the server itself rather than by the schema
ROOT_FIELDS = ("apiVersion", "kind", "metadata")

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


DATE_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def is_date_time(v):
    """An RFC 3339 date-time, as the API server's format check (go-openapi strfmt) takes it."""
    return bool(DATE_TIME_RE.match(v))


def _type_name(v):
    """The JSON type of a value as the API server's messages name it."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _show(v):
    """A value inside an "Invalid value: ..." message: strings quoted, the rest as JSON."""
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (dict, list)):
        return json.dumps(_type_name(v))
    return json.dumps(v)


def _child(path, key):
    return f"{path}.{key}" if path else str(key)


class _Walk:
    def __init__(self, prune, default):
        self.prune, self.default = prune, default
        self.causes = []
        self.pruned = []

    def bad(self, path, msg):
        self.causes.append((path, msg))

    def value(self, schema, v, path, root=False):
        """Prunes, defaults and validates v in place where it can; returns the new value."""
        if not isinstance(schema, dict):
            return v
        if v is None:
            if schema.get("nullable"):
                return None
            t = schema.get("type") or ("object" if root else "")
            if t:
                self.bad(path, f'Invalid value: "null": {path} in body must be of type {t}: "null"')
            return None
        int_or_string = schema.get("x-kubernetes-int-or-string")
        t = schema.get("type")
        if int_or_string:
            if not (_TYPES["integer"](v) or _TYPES["string"](v)):
                self.bad(path, f'Invalid value: {_show(v)}: {path} in body must be of type '
                         f'integer,string: "{_type_name(v)}"')
                return v
        elif t and t in _TYPES and not _TYPES[t](v):
            self.bad(path, f'Invalid value: "{_type_name(v)}": {path} in body must be of type {t}: '
                     f'"{_type_name(v)}"')
            return v
        if isinstance(v, dict):
            v = self.object(schema, v, path, root)
        elif isinstance(v, list):
            v = self.array(schema, v, path)
        self.scalar(schema, v, path)
        self.combinators(schema, v, path)
        return v

    def object(self, schema, v, path, root):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        keep = schema.get("x-kubernetes-preserve-unknown-fields") is True or addl is True
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        out = {}
        for k, sub in v.items():
            if (root or embedded) and k in ROOT_FIELDS:
                out[k] = sub
                continue
            p = _child(path, k)
            if k in props:
                if sub is None and not props[k].get("nullable") and self.default:
                    continue  # a null where none is allowed is dropped (then defaulted, if it has one)
                out[k] = self.value(props[k], sub, p)
            elif isinstance(addl, dict):
                out[k] = self.value(addl, sub, p)
            elif keep or not self.prune:
                out[k] = sub
            else:
                self.pruned.append(p)
        if self.default:
            for k, sub in props.items():
                if k not in out and isinstance(sub, dict) and "default" in sub:
                    out[k] = self.value(sub, copy.deepcopy(sub["default"]), _child(path, k))
        for k in schema.get("required") or []:
            if k not in out:
                self.bad(_child(path, k), "Required value")
        n = len([k for k in out if not ((root or embedded) and k in ROOT_FIELDS)])
        if "minProperties" in schema and n < schema["minProperties"]:
            self.bad(path, f"Invalid value: {n}: {path} in body should have at least "
                     f"{schema['minProperties']} properties")
        if "maxProperties" in schema and n > schema["maxProperties"]:
            self.bad(path, f"Too many: {n}: must have at most {schema['maxProperties']} items")
        return out

    def array(self, schema, v, path):
        items = schema.get("items")
        out = [self.value(items, e, f"{path}[{i}]") if isinstance(items, dict) else e
               for i, e in enumerate(v)]
        if "minItems" in schema and len(out) < schema["minItems"]:
            self.bad(path, f"Invalid value: {len(out)}: {path} in body should have at least "
                     f"{schema['minItems']} items")
        if "maxItems" in schema and len(out) > schema["maxItems"]:
            self.bad(path, f"Too many: {len(out)}: must have at most {schema['maxItems']} items")
        kind = schema.get("x-kubernetes-list-type")
        if schema.get("uniqueItems") or kind == "set":
            seen = []
            for i, e in enumerate(out):
                if e in seen:
                    self.bad(f"{path}[{i}]", f"Duplicate value: {json.dumps(e)}")
                seen.append(e)
        elif kind == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen = []
            for i, e in enumerate(out):
                if not isinstance(e, dict):
                    continue
                k = {key: e.get(key) for key in keys}
                if k in seen:
                    self.bad(f"{path}[{i}]", f"Duplicate value: {json.dumps(k, sort_keys=True)}")
                seen.append(k)
        return out

    def scalar(self, schema, v, path):
        if "enum" in schema and v not in schema["enum"]:
            allowed = ", ".join(json.dumps(e) for e in schema["enum"])
            self.bad(path, f"Unsupported value: {json.dumps(v)}: supported values: {allowed}")
        if isinstance(v, str):
            if "maxLength" in schema and len(v) > schema["maxLength"]:
                self.bad(path, f"Too long: may not be longer than {schema['maxLength']}")
            if "minLength" in schema and len(v) < schema["minLength"]:
                self.bad(path, f"Invalid value: {json.dumps(v)}: {path} in body should be at least "
                         f"{schema['minLength']} chars long")
            if schema.get("format") == "date-time" and not is_date_time(v):
                self.bad(path, f"Invalid value: {json.dumps(v)}: {path} in body must be of type "
                         f"date-time: {json.dumps(v)}")
            if "pattern" in schema:
                try:
                    ok = re.search(schema["pattern"], v) is not None
                except re.error:
                    ok = True  # an RE2 construct Python's re lacks: not checked
                if not ok:
                    self.bad(path, f"Invalid value: {json.dumps(v)}: {path} in body should match "
                             f"'{schema['pattern']}'")
        elif _TYPES["number"](v):
            if "minimum" in schema:
                m = schema["minimum"]
                if v < m or (schema.get("exclusiveMinimum") and v == m):
                    word = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
                    self.bad(path, f"Invalid value: {v}: {path} in body should be {word} {m}")
            if "maximum" in schema:
                m = schema["maximum"]
                if v > m or (schema.get("exclusiveMaximum") and v == m):
                    word = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
                    self.bad(path, f"Invalid value: {v}: {path} in body should be {word} {m}")
            if schema.get("multipleOf") and (v / schema["multipleOf"]) % 1:
                self.bad(path, f"Invalid value: {v}: {path} in body should be a multiple of "
                         f"{schema['multipleOf']}")

    def combinators(self, schema, v, path):
        def ok(sub):
            w = _Walk(prune=False, default=False)
            w.value(sub, copy.deepcopy(v), path)
            return not w.causes

        for sub in schema.get("allOf") or []:
            w = _Walk(prune=False, default=False)
            w.value(sub, copy.deepcopy(v), path)
            self.causes.extend(w.causes)
        if schema.get("anyOf") and not any(ok(s) for s in schema["anyOf"]):
            self.bad(path, f"Invalid value: {_show(v)}: {path} in body must validate at least one "
                     "schema (anyOf)")
        if schema.get("oneOf") and sum(1 for s in schema["oneOf"] if ok(s)) != 1:
            self.bad(path, f"Invalid value: {_show(v)}: {path} in body must validate one and only "
                     "one schema (oneOf)")
        if isinstance(schema.get("not"), dict) and ok(schema["not"]):
            self.bad(path, f"Invalid value: {_show(v)}: {path} in body must not validate the schema "
                     "(not)")


def apply(schema, obj, prune=True, default=True):
    """Prunes, defaults and validates a custom resource (a dict with apiVersion, kind, metadata) as
    kube-apiserver does with its CRD version's openAPIV3Schema. Returns (new object, causes,
    pruned paths); obj is not modified."""
    w = _Walk(prune, default)
    out = w.value(schema, copy.deepcopy(obj), "", root=True)
    return out, w.causes, w.pruned


def validate(schema, obj):
    """The causes (field, message) a custom resource is rejected with, after pruning and defaulting;
    empty when the API server would accept it."""
    return apply(schema, obj)[1]


# --- the CRD's own rules -----------------------------------------------------------------------

def _structural(schema, path, out, in_combinator=False, root=False, int_or_string=False):
    """kube-apiserver's structural-schema rules, the ones that catch real mistakes: a type on every
    specified node (unless int-or-string or preserve-unknown-fields), not both properties and
    additionalProperties, combinators that only restrict, metadata limited to name/generateName."""
    if not isinstance(schema, dict):
        return
    t = schema.get("type")
    if not in_combinator:
        if not t and not schema.get("x-kubernetes-int-or-string") and \
                not schema.get("x-kubernetes-preserve-unknown-fields"):
            out.append((f"{path}.type", "Required value: must not be empty for specified object fields"
                        if schema.get("properties") else
                        "Required value: must not be empty for specified fields"))
        if schema.get("x-kubernetes-int-or-string") and t:
            out.append((f"{path}.type", "Invalid value: must be empty to be structural when "
                        "x-kubernetes-int-or-string is true"))
    else:
        for k in ("type", "default", "nullable", "additionalProperties",
                  "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                  "x-kubernetes-int-or-string"):
            # the one exception: anyOf [{type: integer}, {type: string}] under int-or-string
            if k in schema and not (k == "type" and int_or_string):
                out.append((f"{path}.{k}", "Forbidden: must be undefined to be structural"))
    if schema.get("properties") and isinstance(schema.get("additionalProperties"), dict):
        out.append((f"{path}.additionalProperties", "Forbidden: additionalProperties and properties "
                    "are mutual exclusive"))
    if root and t and t != "object":
        out.append((f"{path}.type", "Invalid value: " + json.dumps(t) + ": must be object at the root"))
    for k, sub in (schema.get("properties") or {}).items():
        if root and k == "metadata" and isinstance(sub, dict):
            extra = set(sub) - {"type", "description", "properties"}
            names = set((sub.get("properties") or {})) - {"name", "generateName"}
            if extra or names or sub.get("type") not in (None, "object"):
                out.append((f"{path}.properties[metadata]", "Forbidden: must not specify anything other "
                            "than name and generateName, but metadata is implicitly specified"))
            continue
        _structural(sub, f"{path}.properties[{k}]", out, in_combinator)
    if isinstance(schema.get("additionalProperties"), dict):
        _structural(schema["additionalProperties"], f"{path}.additionalProperties", out, in_combinator)
    if isinstance(schema.get("items"), dict):
        _structural(schema["items"], f"{path}.items", out, in_combinator)
    elif schema.get("items") is not None:
        out.append((f"{path}.items", "Forbidden: items must be a schema object and not an array"))
    if t == "array" and not in_combinator and not isinstance(schema.get("items"), dict):
        out.append((f"{path}.items", "Required value: must be specified"))
    ios = bool(schema.get("x-kubernetes-int-or-string")) or int_or_string
    for comb in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(schema.get(comb) or []):
            _structural(sub, f"{path}.{comb}[{i}]", out, True, int_or_string=ios)
    if isinstance(schema.get("not"), dict):
        _structural(schema["not"], f"{path}.not", out, True)


def _defaults(schema, path, out):
    """Every default must survive pruning and validate against its own schema."""
    if not isinstance(schema, dict):
        return
    if "default" in schema:
        d = schema["default"]
        w = _Walk(prune=True, default=True)
        got = w.value(schema, copy.deepcopy(d), path)
        for f, m in w.causes:
            out.append((f"{path}.default", f"Invalid value: {json.dumps(d)}: {f}: {m}"))
        if w.pruned or got != d:
            if w.pruned:
                out.append((f"{path}.default", f"Invalid value: {json.dumps(d)}: must not have unknown "
                            f"fields: {', '.join(w.pruned)}"))
    for k, sub in (schema.get("properties") or {}).items():
        _defaults(sub, f"{path}.properties[{k}]", out)
    for k in ("additionalProperties", "items"):
        if isinstance(schema.get(k), dict):
            _defaults(schema[k], f"{path}.{k}", out)


def check_crd(crd):
    """The (field, message) causes kube-apiserver rejects an apiextensions.k8s.io/v1
    CustomResourceDefinition with, beyond its OpenAPI schema; empty when it would accept it."""
    out = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural = spec.get("group", ""), names.get("plural", "")
    name = (crd.get("metadata") or {}).get("name", "")
    if name != f"{plural}.{group}":
        out.append(("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if not group or "." not in group:
        out.append(("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot'))
    if spec.get("scope") not in ("Cluster", "Namespaced"):
        out.append(("spec.scope", f'Unsupported value: {json.dumps(spec.get("scope", ""))}: supported '
                    'values: "Cluster", "Namespaced"'))
    for f in ("plural", "kind"):
        if not names.get(f):
            out.append((f"spec.names.{f}", "Required value"))
    if plural and (plural != plural.lower() or not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", plural)):
        out.append(("spec.names.plural", f'Invalid value: "{plural}": a lowercase RFC 1123 label must '
                    "consist of lower case alphanumeric characters or '-'"))
    versions = spec.get("versions") or []
    if not versions:
        out.append(("spec.versions", "Invalid value: null: must have exactly one version marked as "
                    "storage version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        out.append(("spec.versions", "Invalid value: " + json.dumps([v.get("name") for v in versions]) +
                    ": must have exactly one version marked as storage version"))
    seen = set()
    for i, v in enumerate(versions):
        p = f"spec.versions[{i}]"
        if v.get("name") in seen:
            out.append((f"{p}.name", f'Duplicate value: "{v.get("name")}"'))
        seen.add(v.get("name"))
        schema = ((v.get("schema") or {}).get("openAPIV3Schema"))
        if not isinstance(schema, dict):
            out.append((f"{p}.schema.openAPIV3Schema", "Required value: schemas are required"))
            continue
        sp = f"{p}.schema.openAPIV3Schema"
        _structural(schema, sp, out, root=True)
        _defaults(schema, sp, out)
        st = ((v.get("subresources") or {}).get("status"))
        if st is not None and not isinstance(st, dict):
            out.append((f"{p}.subresources.status", "Invalid value: must be an object"))
    return out


def served_version(crd, version):
    """The spec.versions entry of a served version, or None."""
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version and v.get("served", False):
            return v
    return None
