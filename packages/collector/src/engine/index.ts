// The decision engine: pure functions from policy, observations and the
// previous record to the next record and the actions to carry out.
export * from "./types.js";
export { decide, initialRecord, noticeId } from "./decide.js";
export { extractEvidence, vetoesAt, activeSignalNames, blindHoldSeconds, EMPTY_MEMORY } from "./evidence.js";
export { advanceIdleClock } from "./activity.js";
export {
  BUILTIN_DEFAULT_POLICY,
  DEFAULT_ANNOTATION_PREFIX,
  NON_POLICY_ANNOTATION_NAMES,
  POLICY_KNOBS,
  POLICY_KNOB_NAMES,
  policyFromAnnotations,
  resolvePolicy,
  mergePolicy,
  toEffectivePolicy,
  describeErrors,
  describeFallback,
} from "./policy.js";
export {
  parseCollectorPolicyConfig,
  parseCollectorPolicyDocument,
  defaultCollectorPolicyConfig,
  type CollectorPolicyConfig,
  type ConfigResult,
} from "./config.js";
export { leaseDecision, clampLease } from "./leases.js";
export { persistedAnnotations, restoreRecord, PERSISTED_NAMES, type RestoreResult } from "./persist.js";
export { statusFor, stopInSeconds, PROTO_STATE } from "./status.js";
