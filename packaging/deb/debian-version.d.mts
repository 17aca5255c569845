export function debianVersion(version: string): string | null;
