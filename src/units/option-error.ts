/**
 * An option or argument the caller gave is refused. `option` names it as the library spells it
 * ("temperature", "contextSize", "stopTokens", the unknown key itself for a misspelled one), so
 * that a caller (the server answering 400 with the parameter, a program of its own) need not
 * read the message, which names it too with what was expected. A RangeError, as Node's own
 * out-of-range argument errors are (and as these errors were before they had a class).
 */
export class OptionError extends RangeError {
  constructor(
    message: string,
    readonly option: string,
  ) {
    super(message);
    this.name = "OptionError";
  }
}
