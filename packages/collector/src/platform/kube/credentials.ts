// Per-VM credentials without a master key anywhere but here: for every VM labelled for ws the
// collector creates a Secret `<vm>-ws-agent` in the VM's namespace holding that VM's token (and
// its identity, the collector's addresses and CA), owned by the VM so it goes when the VM goes.
// The VM mounts it as a KubeVirt secret disk (docs/credentials.md); the agent reads it at start.
//
// Least privilege: `create` on secrets and nothing else. The collector never reads a Secret: an
// existing one answers 409 AlreadyExists and is left as it is (the token is a pure function of
// the key and the VM's name, so a Secret this collector made is still right; one someone else
// made with a wrong token shows as bad-token on the probe and in workstation_auth_failures_total).
import { Semaphore } from "../../lib/retry.js";
import { tokenFor } from "../../links/agent-token.js";
import { describeError, httpStatusOf, type KubeClients } from "./client.js";

export const CREDENTIAL_SECRET_SUFFIX = "-ws-agent";
export const CREDENTIAL_LABEL = "workstation.aik8s.run/credential-for";

export interface CredentialSettings {
  /** Collector addresses the agent tries, in order (collector.addresses of its config). */
  addresses: string[];
  /** PEM of the CA that signed the collector's certificate, put beside the token. */
  caPem?: string;
  serverName?: string;
}

export interface CredentialVm {
  namespace: string;
  name: string;
  uid: string;
}

/** The Secret's name for a VM; too long a VM name falls back to a shorter, still unique one. */
export function credentialSecretName(vmName: string): string {
  const name = `${vmName}${CREDENTIAL_SECRET_SUFFIX}`;
  return name.length <= 253
    ? name
    : `${vmName.slice(0, 253 - CREDENTIAL_SECRET_SUFFIX.length)}${CREDENTIAL_SECRET_SUFFIX}`;
}

/** The agent configuration the credential disk carries (the agent's credentialDir reads it). */
export function credentialConfig(vm: CredentialVm, settings: CredentialSettings): string {
  const lines = ["# Written by ws-collector for this VM (docs/credentials.md).", "collector:"];
  lines.push(`  addresses: [${settings.addresses.map((a) => JSON.stringify(a)).join(", ")}]`);
  if (settings.serverName) lines.push(`  serverName: ${JSON.stringify(settings.serverName)}`);
  lines.push("vm:", `  namespace: ${JSON.stringify(vm.namespace)}`, `  name: ${JSON.stringify(vm.name)}`, "");
  return lines.join("\n");
}

/** The Secret for one VM. Pure. */
export function credentialSecret(vm: CredentialVm, key: Buffer, settings: CredentialSettings): Record<string, unknown> {
  const data: Record<string, string> = {
    token: tokenFor(key, vm.namespace, vm.name),
    "config.yaml": credentialConfig(vm, settings),
    ...(settings.caPem ? { "collector-ca.crt": settings.caPem } : {}),
  };
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      name: credentialSecretName(vm.name),
      namespace: vm.namespace,
      labels: {
        "app.kubernetes.io/managed-by": "ws-collector",
        [CREDENTIAL_LABEL]: vm.name.slice(0, 63).replace(/[^a-z0-9]+$/, ""),
      },
      // Garbage-collected with the VM. No blockOwnerDeletion: that would need update on the VM's finalizers.
      ownerReferences: [{ apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name: vm.name, uid: vm.uid }],
    },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])),
  };
}

export interface CredentialIssuerOptions {
  settings: CredentialSettings;
  log: (level: "info" | "warn", message: string) => void;
  /** Creates in flight at once (a fleet seen at start is issued a few at a time). */
  concurrency?: number;
}

/**
 * Creates each seen VM's Secret once per VM uid (a VM re-created under the same name gets a new
 * one: the old Secret was collected with the old VM). Failures are retried on the VM's next change.
 */
export class CredentialIssuer {
  private readonly done = new Set<string>();
  private readonly inFlight = new Set<string>();
  /** Secrets being created at once; the rest wait their turn in arrival order. */
  private readonly slots: Semaphore;
  private forbiddenReported = false;
  /** Secrets this issuer created, and those that were there already (for tests and the log). */
  readonly counts = { created: 0, existing: 0, failed: 0 };

  constructor(
    private readonly clients: KubeClients,
    private readonly key: Buffer,
    private readonly options: CredentialIssuerOptions,
  ) {
    this.slots = new Semaphore(options.concurrency ?? 4);
  }

  observe(vm: CredentialVm): void {
    if (this.done.has(vm.uid) || this.inFlight.has(vm.uid)) return;
    this.inFlight.add(vm.uid);
    void this.slots.run(() => this.create(vm)).finally(() => this.inFlight.delete(vm.uid));
  }

  /** Resolves when nothing is in flight (tests). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  private async create(vm: CredentialVm): Promise<void> {
    const body = credentialSecret(vm, this.key, this.options.settings);
    try {
      await this.clients.core.createNamespacedSecret({ namespace: vm.namespace, body: body as never });
      this.done.add(vm.uid);
      this.counts.created++;
      this.options.log("info", `created the credential Secret ${vm.namespace}/${credentialSecretName(vm.name)}`);
    } catch (error) {
      const status = httpStatusOf(error);
      if (status === 409) {
        this.done.add(vm.uid);
        this.counts.existing++;
        return;
      }
      this.counts.failed++;
      if (status === 403) {
        if (this.forbiddenReported) return;
        this.forbiddenReported = true;
      }
      this.options.log(
        "warn",
        `cannot create the credential Secret for ${vm.namespace}/${vm.name}: ${describeError(error)}${status === 403 ? " — grant create on secrets (packaging/kubernetes-overlays/credentials/rbac-credentials.yaml)" : ""}`,
      );
    }
  }
}

/** `kubernetes.credentials` of the collector's config: present means on. */
export interface CredentialsConfig {
  addresses: string[];
  caFile?: string;
  serverName?: string;
}

export function parseCredentialsConfig(
  value: unknown,
  problems: string[],
  label: string,
): CredentialsConfig | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) {
    problems.push(`${label}: must be a mapping (addresses, caFile, serverName)`);
    return undefined;
  }
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (!["addresses", "caFile", "serverName"].includes(key)) {
      problems.push(`${label}: unknown setting "${key}" (known: addresses, caFile, serverName)`);
    }
  }
  const addresses = obj["addresses"];
  if (
    !Array.isArray(addresses) ||
    addresses.length === 0 ||
    !addresses.every((a) => typeof a === "string" && /^[\w.-]+:\d{1,5}$|^\[[0-9a-f:.]+\]:\d{1,5}$/i.test(a))
  ) {
    problems.push(
      `${label}.addresses: a list of host:port the agents try in order (docs/kubernetes.md#reaching-the-collector)`,
    );
    return undefined;
  }
  const text = (key: string): string | undefined => {
    const v = obj[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v === "string" && v !== "") return v;
    problems.push(`${label}.${key}: expected a string`);
    return undefined;
  };
  const caFile = text("caFile");
  const serverName = text("serverName");
  return { addresses: addresses as string[], ...(caFile ? { caFile } : {}), ...(serverName ? { serverName } : {}) };
}
