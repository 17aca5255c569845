// npm's semver → a Debian version: a pre-release must sort before its release, which in
// Debian takes "~" (1.0.0~rc.1 < 1.0.0), where semver has "-".

/** @returns {string | null} the Debian version, or null when `version` is not semver */
export function debianVersion(version) {
  const match = /^(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$/.exec(version);
  if (!match) return null;
  return match[1] + (match[2] ? `~${match[2].replace(/-/g, ".")}` : "") + (match[3] ? `+${match[3]}` : "");
}

/** The Debian revision of this packaging (the "-1" of 0.1.0-1): a package, not a native one. */
export const DEBIAN_REVISION = "1";

/** @returns {string | null} the package's full version, upstream and revision (0.1.0 → 0.1.0-1) */
export function debianPackageVersion(version) {
  const upstream = debianVersion(version);
  return upstream === null ? null : `${upstream}-${DEBIAN_REVISION}`;
}
