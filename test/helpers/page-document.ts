/**
 * The part of a page's `document` that the tests' in-page functions read (those given to
 * page.evaluate and page.waitForFunction, which run in the browser, not in Node). The project
 * compiles without the DOM lib (see src/platform/web.ts), so a test file with such functions
 * declares `declare const document: PageDocument;`, a type for them only: Node has no document.
 */
export interface PageElement {
  readonly textContent: string | null;
}

export interface PageButton extends PageElement {
  readonly disabled: boolean;
  click(): void;
}

export interface PageDocument {
  getElementById(id: string): PageElement | null;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
}
