/**
 * Kubernetes label and field selectors, the subset of the apiserver grammar that clients send:
 * `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas.
 */

export type Requirement =
  | { op: "eq"; key: string; value: string }
  | { op: "neq"; key: string; value: string }
  | { op: "exists"; key: string }
  | { op: "absent"; key: string }
  | { op: "in"; key: string; values: string[] }
  | { op: "notin"; key: string; values: string[] };

export class SelectorError extends Error {}

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of selector) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

const KEY = "[A-Za-z0-9][-A-Za-z0-9_./]*";
const SET_RE = new RegExp(String.raw`^(${KEY})\s+(in|notin)\s*\(([^)]*)\)$`);
const NEQ_RE = new RegExp(String.raw`^(${KEY})\s*!=\s*(.*)$`);
const EQ_RE = new RegExp(String.raw`^(${KEY})\s*==?\s*(.*)$`);
const ABSENT_RE = new RegExp(String.raw`^!\s*(${KEY})$`);
const EXISTS_RE = new RegExp(`^(${KEY})$`);

export function parseLabelSelector(selector: string | null | undefined): Requirement[] {
  if (!selector) return [];
  return splitTopLevel(selector).map((term) => {
    let m = SET_RE.exec(term);
    if (m) {
      const values = (m[3] ?? "")
        .split(",")
        .map((v) => v.trim())
        .filter((v) => v.length > 0);
      return { op: m[2] === "in" ? "in" : "notin", key: m[1]!, values } as Requirement;
    }
    m = NEQ_RE.exec(term);
    if (m) return { op: "neq", key: m[1]!, value: (m[2] ?? "").trim() };
    m = EQ_RE.exec(term);
    if (m) return { op: "eq", key: m[1]!, value: (m[2] ?? "").trim() };
    m = ABSENT_RE.exec(term);
    if (m) return { op: "absent", key: m[1]! };
    m = EXISTS_RE.exec(term);
    if (m) return { op: "exists", key: m[1]! };
    throw new SelectorError(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

export function matchesRequirements(
  labels: Record<string, string> | undefined,
  requirements: readonly Requirement[],
): boolean {
  const l = labels ?? {};
  return requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const value = l[r.key];
    switch (r.op) {
      case "eq":
        return has && value === r.value;
      case "neq":
        return !has || value !== r.value;
      case "exists":
        return has;
      case "absent":
        return !has;
      case "in":
        return has && r.values.includes(value ?? "");
      case "notin":
        return !has || !r.values.includes(value ?? "");
    }
  });
}

/** Field selectors: only `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`. */
export function parseFieldSelector(
  selector: string | null | undefined,
): Array<{ field: "metadata.name" | "metadata.namespace"; value: string; negate: boolean }> {
  if (!selector) return [];
  return splitTopLevel(selector).map((term) => {
    const m = /^(metadata\.name|metadata\.namespace)\s*(!=|==|=)\s*(.*)$/.exec(term);
    if (!m) throw new SelectorError(`field label not supported: ${JSON.stringify(term)}`);
    return {
      field: m[1] as "metadata.name" | "metadata.namespace",
      value: (m[3] ?? "").trim(),
      negate: m[2] === "!=",
    };
  });
}
