// Validates rendered Kubernetes objects against their API types, rejecting unknown fields and
// values of the wrong type (what `kubectl apply --validate=strict` would reject, without a
// cluster). Two sources of types:
//   - core, apps, rbac, networking…: the model classes of @kubernetes/client-node (generated
//     from the Kubernetes OpenAPI), through their attributeTypeMap;
//   - CRDs (KubeVirt, CDI, Prometheus Operator): a small schema kept as test data
//     (test/packaging/schemas/crds.json), in the same type-reference grammar.
//
// Type references: string | integer | number | boolean | any | intOrString | quantity |
// enum:a|b | []T | map[string]T | k8s:V1Name (a client-node model) | Name (a test-data type).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { repoRoot } from "../../support/process.js";

export interface ObjectType {
  properties: Record<string, string>;
  required?: string[];
}

export interface CrdSchema {
  kinds: Record<string, string>;
  types: Record<string, ObjectType>;
}

interface AttributeType {
  baseName: string;
  type: string;
}
type ModelClass = { attributeTypeMap?: AttributeType[] };

export async function loadClientNodeModels(): Promise<Record<string, ModelClass>> {
  const require = createRequire(path.join(repoRoot, "packages/collector/package.json"));
  const entry = require.resolve("@kubernetes/client-node");
  return (await import(pathToFileURL(entry).href)) as Record<string, ModelClass>;
}

export function loadCrdSchema(): CrdSchema {
  return JSON.parse(readFileSync(path.join(repoRoot, "test/packaging/schemas/crds.json"), "utf8")) as CrdSchema;
}

/** client-node's TypeScript-ish type strings, in the grammar above. */
export function fromClientNodeType(type: string): string {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return `[]${fromClientNodeType(array[1]!)}`;
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return `map[string]${fromClientNodeType(map[1]!)}`;
  switch (type) {
    case "string":
    case "String":
    case "Date":
      return "string";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "any":
      return "any";
    case "IntOrString":
      return "intOrString";
    default:
      return `k8s:${type}`;
  }
}

/** Which type an object's apiVersion and kind name: client-node's model, or a CRD schema type. */
export function typeForObject(
  apiVersion: string,
  kind: string,
  models: Record<string, ModelClass>,
  crds: CrdSchema,
): string | null {
  const crd = crds.kinds[`${apiVersion} ${kind}`];
  if (crd) return crd;
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const builtInGroups = [
    "",
    "apps",
    "rbac.authorization.k8s.io",
    "networking.k8s.io",
    "policy",
    "batch",
    "autoscaling",
    "coordination.k8s.io",
    "scheduling.k8s.io",
  ];
  if (!builtInGroups.includes(group!)) return null;
  const className = `${version![0]!.toUpperCase()}${version!.slice(1)}${kind}`;
  return models[className]?.attributeTypeMap ? `k8s:${className}` : null;
}

export class ApiTypes {
  constructor(
    private readonly models: Record<string, ModelClass>,
    private readonly crds: CrdSchema,
  ) {}

  /** Every problem in `value` read as `typeRef`, each with its path. */
  validate(value: unknown, typeRef: string, where = ""): string[] {
    const errors: string[] = [];
    this.check(value, typeRef, where || "(root)", errors);
    return errors;
  }

  validateObject(object: Record<string, unknown>): string[] {
    const apiVersion = String(object.apiVersion);
    const kind = String(object.kind);
    const name = (object.metadata as { name?: string } | undefined)?.name ?? "?";
    const type = typeForObject(apiVersion, kind, this.models, this.crds);
    if (!type)
      return [`${apiVersion} ${kind} ${name}: no API type known for it (add it to test/packaging/schemas/crds.json)`];
    return this.validate(object, type, `${kind}/${name}`);
  }

  private objectType(typeRef: string): ObjectType | undefined {
    if (typeRef.startsWith("k8s:")) {
      const model = this.models[typeRef.slice(4)];
      if (!model?.attributeTypeMap) return undefined;
      return {
        properties: Object.fromEntries(model.attributeTypeMap.map((a) => [a.baseName, fromClientNodeType(a.type)])),
      };
    }
    return this.crds.types[typeRef];
  }

  private check(value: unknown, typeRef: string, where: string, errors: string[]): void {
    const wrong = (expected: string): void => {
      errors.push(`${where}: expected ${expected}, got ${JSON.stringify(value)}`);
    };
    if (value === null) return; // an explicit null means "unset" to the API server
    if (typeRef.startsWith("[]")) {
      if (!Array.isArray(value)) return wrong("a list");
      value.forEach((item, index) => this.check(item, typeRef.slice(2), `${where}[${index}]`, errors));
      return;
    }
    if (typeRef.startsWith("map[string]")) {
      if (typeof value !== "object" || Array.isArray(value)) return wrong("a mapping");
      for (const [key, item] of Object.entries(value as Record<string, unknown>))
        this.check(item, typeRef.slice("map[string]".length), `${where}.${key}`, errors);
      return;
    }
    if (typeRef.startsWith("enum:")) {
      const allowed = typeRef.slice(5).split("|");
      if (typeof value !== "string" || !allowed.includes(value)) wrong(`one of ${allowed.join(", ")}`);
      return;
    }
    switch (typeRef) {
      case "any":
        return;
      case "string":
        if (typeof value !== "string") wrong("a string");
        return;
      case "boolean":
        if (typeof value !== "boolean") wrong("true or false");
        return;
      case "integer":
        if (!Number.isInteger(value)) wrong("an integer");
        return;
      case "number":
        if (typeof value !== "number") wrong("a number");
        return;
      case "intOrString":
        if (typeof value !== "string" && !Number.isInteger(value)) wrong("an integer or a string");
        return;
      case "quantity":
        if (
          !(
            typeof value === "string" && /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$/.test(value)
          ) &&
          !Number.isFinite(value)
        ) {
          wrong("a quantity such as 16Gi or 500m");
        }
        return;
    }
    const type = this.objectType(typeRef);
    if (!type) {
      errors.push(`${where}: the schema names an unknown type ${typeRef}`);
      return;
    }
    if (typeof value !== "object" || Array.isArray(value)) return wrong(`an object (${typeRef})`);
    const record = value as Record<string, unknown>;
    for (const [key, item] of Object.entries(record)) {
      const fieldType = type.properties[key];
      if (fieldType === undefined) {
        errors.push(`${where}.${key}: unknown field (${typeRef} has ${Object.keys(type.properties).join(", ")})`);
        continue;
      }
      this.check(item, fieldType, `${where}.${key}`, errors);
    }
    for (const key of type.required ?? []) {
      if (record[key] === undefined) errors.push(`${where}.${key}: required`);
    }
  }
}
