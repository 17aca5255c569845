export function debianVersion(version: string): string | null;
export const DEBIAN_REVISION: string;
export function debianPackageVersion(version: string): string | null;
