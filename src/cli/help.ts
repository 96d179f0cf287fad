/** The "Examples:" block appended to a command's --help. */
export function examples(...cmds: string[]): string {
  return titled('Examples', cmds);
}

export function titled(title: string, cmds: string[]): string {
  return `\n${title}:\n${cmds.map((c) => `  $ ${c}`).join('\n')}\n`;
}
