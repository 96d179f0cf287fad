/** A data directory or master key msgd and msgctl cannot use: its message is one line for the operator. */
export class DataDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DataDirError';
  }
}
