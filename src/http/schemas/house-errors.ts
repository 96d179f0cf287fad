import type { z } from 'zod';

// Messages for issues a schema does not word itself, in the house style of the partner APIs
// ("required: …", "must be a string", "must be at most 100 characters"), so a partner never
// reads zod's own wording ("Invalid input: expected string, received number") in details.
// Passed per parse (validate() in send-flow.ts, the /v1 validator compiler): a schema's own
// message still wins, and config loading or the CLI keep theirs.

const TYPES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  bigint: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  tuple: 'a list',
  object: 'an object',
  record: 'an object',
  date: 'a date',
  nan: 'a number',
};

const count = (n: number | bigint, one: string, many = `${one}s`) => `${n} ${Number(n) === 1 ? one : many}`;

const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

export const houseError: z.core.$ZodErrorMap = (iss) => {
  switch (iss.code) {
    case 'invalid_type':
      if (iss.input === undefined || iss.input === null) return 'required';
      return `must be ${TYPES[iss.expected] ?? iss.expected}`;
    case 'too_small': {
      const min = iss.minimum;
      if (iss.origin === 'string')
        return Number(min) <= 1 ? 'must not be empty' : `must be at least ${count(min, 'character')}`;
      if (iss.origin === 'array' || iss.origin === 'set')
        return Number(min) <= 1 ? 'must not be empty' : `must have at least ${count(min, 'item')}`;
      return iss.inclusive === false ? `must be greater than ${min}` : `must be at least ${min}`;
    }
    case 'too_big': {
      const max = iss.maximum;
      if (iss.origin === 'string') return `must be at most ${count(max, 'character')}`;
      if (iss.origin === 'array' || iss.origin === 'set') return `must have at most ${count(max, 'item')}`;
      return iss.inclusive === false ? `must be less than ${max}` : `must be at most ${max}`;
    }
    case 'invalid_value':
      if (iss.input === undefined || iss.input === null) return `required: one of ${iss.values.map(show).join(', ')}`;
      return iss.values.length === 1
        ? `must be ${JSON.stringify(iss.values[0])}`
        : `must be one of ${iss.values.map(show).join(', ')}`;
    case 'invalid_format':
      return iss.format === 'regex' ? 'is not in the expected format' : `must be a valid ${iss.format}`;
    case 'not_multiple_of':
      return `must be a multiple of ${iss.divisor}`;
    case 'unrecognized_keys':
      return `unknown ${iss.keys.length === 1 ? 'field' : 'fields'}: ${iss.keys.join(', ')}`;
    case 'invalid_key':
      return 'has a key that is not allowed';
    case 'invalid_element':
      return 'has a value that is not allowed';
    case 'invalid_union':
      return 'is not any of the accepted forms';
    default:
      return 'is not valid';
  }
};
