// The collector's Kubernetes side. See docs/kubernetes.md.
export {
  contextNamespace,
  createKubeClients,
  describeError,
  httpStatusOf,
  loadKubeConfig,
  rawKubeRequest,
} from "./client.js";
export type {
  KubeClientOptions,
  KubeClients,
  KubeConfigSource,
  KubeRequestInfo,
  KubeRequestObserver,
} from "./client.js";
export { DEFAULT_BACKOFF, Semaphore, backoffDelayMs, isRetryableStatus } from "../../lib/retry.js";
export type { BackoffPolicy, Sleep } from "../../lib/retry.js";
export { KubeInventory } from "./inventory.js";
export type { InventoryChange, InventoryOptions, InventoryVm, VmVolume } from "./inventory.js";
export { VmStopper, stopGracePeriod, stopPath } from "./stop.js";
export type { StopVmOptions, StopVmResult, VmStopperOptions } from "./stop.js";
export {
  DEFAULT_ANNOTATION_PREFIX,
  allowsEphemeralStop,
  claimsToCheck,
  describeVerdict,
  stopSafety,
} from "./safety.js";
export type { PvcFacts, SafetyInput, SafetyVerdict } from "./safety.js";
export { checkStopSafety, readPvcFacts } from "./pvcs.js";
export type { SafetyCheck } from "./pvcs.js";
export { AUDIT_REASONS, KubeAudit, auditEvent, lastStopAnnotations, truncateUtf8 } from "./audit.js";
export type {
  AuditEvent,
  AuditEventType,
  AuditReason,
  AuditTarget,
  AuditWriteResult,
  KubeAuditOptions,
} from "./audit.js";
export type { LastStop } from "../../loop/last-stop.js";
export { LeaderElector } from "./leader.js";
export { LEADER_LABEL, LEADER_LABEL_VALUE, LeaderLabel, leaderLabelPatch } from "./leader-label.js";
export type { LeaderLabelOptions } from "./leader-label.js";
export type { ElectionTimers, LeaderElectorOptions } from "./leader.js";
export { checkPeerIdentity, normalizeIp, parsePeerAddress } from "./identity.js";
export type { PeerAddress, PeerIdentityVerdict } from "./identity.js";
export { isStopInEffect, resourcesOf, terminationGracePeriodOf, vmFacts } from "./vm-model.js";
export type { DeviceCount, VmAttachment, VmFacts, VmResources } from "./vm-model.js";
export { DEFAULT_OWNER_LABEL, describeFreed, freedParts, freedRecord, gpuCountOf, vmOwner } from "./vm-resources.js";
