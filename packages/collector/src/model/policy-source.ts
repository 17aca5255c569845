// Where a VM's policy inputs come from (Kubernetes labels/annotations, or the
// standalone config file), resolved through the engine's pure policy rules.
import { type VmKey, vmId } from "./vm-key.js";
import { policyFromAnnotations, resolvePolicy } from "../engine/policy.js";
import type { Policy, PolicyOverrides, ResolvedPolicy } from "../engine/types.js";

export interface VmMetadata {
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface PolicySource {
  defaults: Policy;
  profiles: Record<string, PolicyOverrides>;
  prefix: string;
  metadataFor(vm: VmKey): VmMetadata;
}

export function resolveVmPolicy(source: PolicySource, vm: VmKey, lastValid: Policy | undefined): ResolvedPolicy {
  const { labels, annotations } = source.metadataFor(vm);
  return resolvePolicy(
    lastValid,
    policyFromAnnotations(labels, annotations, source.defaults, source.profiles, source.prefix),
  );
}

/** Standalone: per-VM metadata from the config file; VMs not listed get the defaults. */
export function staticPolicySource(
  defaults: Policy,
  profiles: Record<string, PolicyOverrides>,
  prefix: string,
  vms: Record<string, VmMetadata>,
): PolicySource {
  return {
    defaults,
    profiles,
    prefix,
    metadataFor: (vm) => {
      const entry = vms[vmId(vm)];
      if (!entry) return { labels: {}, annotations: {} };
      // Config files may name settings without the prefix ("idle-timeout: 1h").
      const withPrefix = (map: Record<string, string>) =>
        Object.fromEntries(Object.entries(map).map(([k, v]) => [k.includes("/") ? k : `${prefix}${k}`, v]));
      return { labels: withPrefix(entry.labels), annotations: withPrefix(entry.annotations) };
    },
  };
}
