/**
 * Kubernetes RBAC evaluation for the fake API server: request attributes as the apiserver derives
 * them (verb from method and path, resource/subresource, namespace, name) matched against
 * ClusterRole and Role rules, so a test can run the collector under its real RBAC manifest and
 * see every request it makes allowed and everything else forbidden.
 */

export interface RequestAttributes {
  verb: string;
  /** "" for the core group. */
  group: string;
  /** "virtualmachines", or "virtualmachines/stop" for a subresource. */
  resource: string;
  namespace: string | undefined;
  name: string | undefined;
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}

export interface RbacPolicy {
  /** Rules that apply in every namespace (ClusterRoles bound by ClusterRoleBindings). */
  clusterRules: PolicyRule[];
  /** Rules that apply in one namespace (Roles bound by RoleBindings there). */
  namespacedRules: Array<{ namespace: string; rules: PolicyRule[] }>;
}

function matches(list: string[] | undefined, value: string): boolean {
  return (list ?? []).some((entry) => entry === "*" || entry === value);
}

export function ruleAllows(rule: PolicyRule, a: RequestAttributes): boolean {
  if (!matches(rule.verbs, a.verb)) return false;
  if (!matches(rule.apiGroups, a.group)) return false;
  if (!matches(rule.resources, a.resource)) return false;
  if (rule.resourceNames && rule.resourceNames.length > 0) {
    return a.name !== undefined && rule.resourceNames.includes(a.name);
  }
  return true;
}

export function policyAllows(policy: RbacPolicy, a: RequestAttributes): boolean {
  if (policy.clusterRules.some((r) => ruleAllows(r, a))) return true;
  return policy.namespacedRules.some(
    (scope) => scope.namespace === a.namespace && scope.rules.some((r) => ruleAllows(r, a)),
  );
}

/** The verb the apiserver's authorizer sees for an HTTP request. */
export function verbFor(method: string, hasName: boolean, watch: boolean): string {
  switch (method.toUpperCase()) {
    case "GET":
      return watch ? "watch" : hasName ? "get" : "list";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return hasName ? "delete" : "deletecollection";
    default:
      return method.toLowerCase();
  }
}

/**
 * Builds a policy from RBAC manifests (ClusterRole, ClusterRoleBinding, Role, RoleBinding) for
 * one ServiceAccount.
 */
export function policyForServiceAccount(
  documents: unknown[],
  serviceAccount: { namespace: string; name: string },
): RbacPolicy {
  type Doc = {
    kind?: string;
    metadata?: { name?: string; namespace?: string };
    rules?: PolicyRule[];
    roleRef?: { kind?: string; name?: string };
    subjects?: Array<{ kind?: string; name?: string; namespace?: string }>;
  };
  const docs = documents.filter((d): d is Doc => typeof d === "object" && d !== null);
  const bindsUs = (d: Doc) =>
    (d.subjects ?? []).some(
      (s) => s.kind === "ServiceAccount" && s.name === serviceAccount.name && s.namespace === serviceAccount.namespace,
    );
  const clusterRole = (name: string | undefined) =>
    docs.find((d) => d.kind === "ClusterRole" && d.metadata?.name === name)?.rules ?? [];
  const role = (namespace: string | undefined, name: string | undefined) =>
    docs.find((d) => d.kind === "Role" && d.metadata?.name === name && d.metadata?.namespace === namespace)?.rules ??
    [];
  const policy: RbacPolicy = { clusterRules: [], namespacedRules: [] };
  for (const d of docs) {
    if (!bindsUs(d)) continue;
    if (d.kind === "ClusterRoleBinding" && d.roleRef?.kind === "ClusterRole")
      policy.clusterRules.push(...clusterRole(d.roleRef.name));
    if (d.kind === "RoleBinding") {
      const rules =
        d.roleRef?.kind === "ClusterRole" ? clusterRole(d.roleRef.name) : role(d.metadata?.namespace, d.roleRef?.name);
      policy.namespacedRules.push({ namespace: d.metadata?.namespace ?? "", rules });
    }
  }
  return policy;
}
