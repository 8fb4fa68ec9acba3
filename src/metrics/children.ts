/**
 * A metric's children (its series) by two label values, each made once: reporting an event is
 * then two map lookups, with no label string built (a status code stays a number as its key).
 */
export class LabelledChildren<Child> {
  readonly #byFirst = new Map<string, Map<string | number, Child>>();
  readonly #make: (first: string, second: string) => Child;

  constructor(make: (first: string, second: string) => Child) {
    this.#make = make;
  }

  get(first: string, second: string | number): Child {
    let bySecond = this.#byFirst.get(first);
    if (bySecond === undefined) this.#byFirst.set(first, (bySecond = new Map()));
    let child = bySecond.get(second);
    if (child === undefined) bySecond.set(second, (child = this.#make(first, String(second))));
    return child;
  }
}
