export function roffEscape(text: string): string;
export function splitSections(help: string): { title: string; lines: string[] }[] | null;
export function splitUsage(help: string): { summary: string; synopsis: string[]; body: string[] };
export function helpToMan(page: {
  name: string;
  section: number;
  date: string;
  source: string;
  manual: string;
  help: string;
  commands?: { name: string; help: string }[];
  seeAlso?: string[];
}): string;
