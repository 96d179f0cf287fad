// WhatsApp templates on the send API, in both shapes partners use:
//   flat:   {"template": "name", "language": "en_US", "parameters": [...] | "components": [...]}
//   object: {"template": {"name", "language": "en_US" | {"code": "en_US"}, "parameters" | "components"}}
// Checked by hand rather than by a zod union, so every problem gets its own field and a
// message in the house style. Nothing a partner gives is dropped silently: what is not sent
// to Meta is refused, because an accepted template is charged whatever Meta then says.

import { TEMPLATE_CATEGORIES, type TemplateCategory } from '../../core/message-content.js';

export const TEMPLATE_NAME = /^[a-z0-9_]{1,512}$/;
export const LANGUAGE = /^[a-z]{2,3}(_[A-Z]{2})?$/;
const MAX_PARAMETERS = 100;
const MAX_PARAMETER_CHARS = 1024;
const MAX_COMPONENTS = 20;

/** The template as stored and as the Cloud API takes it (language as its code). */
export interface Template {
  name: string;
  language: string;
  components?: unknown[];
  /** Meta's category of the template as the partner names it: what a suppression lets through. */
  category?: TemplateCategory;
}

/** AUTHENTICATION, MARKETING or UTILITY in any case; null when it is none of them. */
function categoryOf(v: unknown): TemplateCategory | null {
  if (typeof v !== 'string') return null;
  const up = v.trim().toUpperCase();
  return (TEMPLATE_CATEGORIES as readonly string[]).includes(up) ? (up as TemplateCategory) : null;
}

type Path = (string | number)[];
export type AddIssue = (path: Path, message: string) => void;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A language code, given as a string or as the Cloud API's {"code": ...}; null when it is neither. */
function languageCode(v: unknown): string | null {
  const code = isObject(v) ? v.code : v;
  return typeof code === 'string' && LANGUAGE.test(code) ? code : null;
}

/** "required: …" only when the language is absent; a language given in another form is "must be". */
function languageProblem(v: unknown, required: string): string {
  return v == null ? required : 'must be a language code such as en or en_US (ll or ll_CC), or {"code": "en_US"}';
}

function checkParameters(v: unknown, path: Path, add: AddIssue) {
  if (!Array.isArray(v)) return add(path, 'must be a list of strings: the body parameters, in order');
  if (v.length > MAX_PARAMETERS) return add(path, `must have at most ${MAX_PARAMETERS} parameters`);
  v.forEach((p, i) => {
    if (typeof p !== 'string') add([...path, i], 'must be a string');
    else if (p.trim() === '') add([...path, i], 'must not be empty or only whitespace: Meta refuses a blank parameter');
    else if (p.length > MAX_PARAMETER_CHARS) add([...path, i], `must be at most ${MAX_PARAMETER_CHARS} characters`);
  });
}

/** Empty or whitespace only: a text that shows nothing. */
/**
 * Nothing a reader would see: whitespace, and the zero-width characters trim() keeps (U+200B-U+200D,
 * U+2060). For a message's text; template parameters are Meta's to judge beyond trim() (a
 * zero-width space is a common stand-in for an empty variable).
 */
export const isBlank = (s: string) => /^[\s\u200B-\u200D\u2060]*$/.test(s);

function checkComponents(v: unknown, path: Path, add: AddIssue) {
  if (!Array.isArray(v))
    return add(path, 'must be a list of Cloud API components, e.g. [{"type": "body", "parameters": [...]}]');
  if (v.length > MAX_COMPONENTS) return add(path, `must have at most ${MAX_COMPONENTS} components`);
  // Only what is surely broken is refused here; the rest of a component is Meta's to judge.
  v.forEach((c, i) => {
    const at = [...path, i];
    if (!isObject(c)) return add(at, 'must be an object with a type, e.g. {"type": "body", "parameters": [...]}');
    if (typeof c.type !== 'string' || isBlank(c.type))
      add([...at, 'type'], 'required: the component type (header, body, button, ...)');
    if (c.parameters === undefined) return;
    if (!Array.isArray(c.parameters))
      return add([...at, 'parameters'], 'must be a list of parameters, e.g. [{"type": "text", "text": "Ann"}]');
    c.parameters.forEach((p, j) => {
      const pat = [...at, 'parameters', j];
      if (!isObject(p)) return add(pat, 'must be an object with a type, e.g. {"type": "text", "text": "Ann"}');
      if (typeof p.type !== 'string' || isBlank(p.type))
        return add([...pat, 'type'], 'required: the parameter type (text, currency, date_time, image, ...)');
      if (p.type !== 'text') return;
      if (typeof p.text !== 'string') add([...pat, 'text'], 'required for a text parameter: a string');
      else if (p.text.trim() === '')
        add([...pat, 'text'], 'must not be empty or only whitespace: Meta refuses a blank parameter');
    });
  });
}

/**
 * Check the template fields of a WhatsApp body (reporting through add) and return the
 * template to send; undefined when something is wrong.
 */
export function templateOf(b: Record<string, unknown>, add: AddIssue): Template | undefined {
  const t = b.template;
  const errors = { n: 0 };
  const report: AddIssue = (path, message) => {
    errors.n++;
    add(path, message);
  };
  let name: unknown, language: unknown, parameters: unknown, components: unknown, category: unknown, at: Path;
  if (t == null) {
    report(['template'], 'required for type "template": a template name, or {name, language, parameters?}');
    return undefined;
  } else if (typeof t === 'string') {
    ({ language, parameters, components, category } = b);
    name = t;
    at = [];
    if (!TEMPLATE_NAME.test(t)) report(['template'], 'template name: lowercase letters, digits and underscores');
    if (languageCode(language) === null)
      report(
        ['language'],
        languageProblem(language, 'required with a template name: a language code such as en or en_US'),
      );
  } else if (isObject(t)) {
    ({ name, language, parameters, components, category } = t);
    at = ['template'];
    if (name == null)
      report(['template', 'name'], 'required: the template name (lowercase letters, digits and underscores)');
    else if (typeof name !== 'string' || !TEMPLATE_NAME.test(name))
      report(['template', 'name'], 'must be a template name: lowercase letters, digits and underscores');
    if (languageCode(language) === null) {
      report(
        ['template', 'language'],
        languageProblem(language, 'required: a language code such as en or en_US, or {"code": "en_US"}'),
      );
    }
    // Outside the object they would not be sent: say so rather than charge for a template without them.
    for (const k of ['language', 'parameters', 'components', 'category'] as const) {
      if (b[k] != null)
        report(
          [k],
          `with a template object, put ${k} inside it: "template": {"name", "language", "parameters" or "components"}`,
        );
    }
  } else {
    report(['template'], 'must be a template name or {name, language, parameters?}');
    return undefined;
  }
  // null is absent here as everywhere in the send API.
  category ??= undefined;
  if (category !== undefined && categoryOf(category) === null)
    report([...at, 'category'], "must be AUTHENTICATION, MARKETING or UTILITY (the template's category at Meta)");
  parameters ??= undefined;
  components ??= undefined;
  if (parameters !== undefined && components !== undefined) {
    report(
      [...at, 'components'],
      'give parameters or components, not both: components (the Cloud API shape) replace parameters',
    );
  } else if (components !== undefined) {
    checkComponents(components, [...at, 'components'], report);
  } else if (parameters !== undefined) {
    checkParameters(parameters, [...at, 'parameters'], report);
  }
  if (errors.n > 0) return undefined;
  const list =
    (components as unknown[] | undefined) ??
    ((parameters as string[] | undefined)?.length
      ? [{ type: 'body', parameters: (parameters as string[]).map((text) => ({ type: 'text', text })) }]
      : undefined);
  const cat = categoryOf(category);
  return {
    name: name as string,
    language: languageCode(language)!,
    ...(list ? { components: list } : {}),
    ...(cat ? { category: cat } : {}),
  };
}
