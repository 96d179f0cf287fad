import { useRef, useState } from 'react';
import { Confirm, Form, SecretBox, type Field, type FormValues } from './components.js';
import { useDeps, type FlashState } from './hooks.js';

// An action's steps over a screen: a form, then (for money and destructive actions) a
// confirmation that names exactly what will happen, then the flash line with the outcome.
// A form's step that throws keeps the form open with msgctl's message for the error.

export interface Done {
  text: string;
  /** A token secret to show once. */
  secret?: { title: string; value: string };
}

export type Step =
  | {
      kind: 'form';
      title: string;
      note?: string;
      fields: Field[];
      /** The next step, or what happened (the action ran); a promise of either when it runs through the store. */
      submit(values: FormValues): Step | Done | Promise<Step | Done>;
      error?: string | null;
    }
  | { kind: 'confirm'; title: string; lines: string[]; run(): Done | Promise<Done> }
  | { kind: 'secret'; title: string; secret: string };

const isStep = (x: Step | Done): x is Step => 'kind' in x;

export function useOverlay(setFlash: (f: FlashState) => void, onDone: () => void) {
  const deps = useDeps();
  const [step, setStepState] = useState<Step | null>(null);
  // The step on screen as of the last key: a second Enter or y that arrives before the next
  // render finds the step gone and does nothing, so no action ever runs twice.
  const live = useRef<Step | null>(null);
  const setStep = (s: Step | null) => {
    live.current = s;
    setStepState(s);
  };
  const finish = (d: Done) => {
    setFlash({ ok: true, text: d.text });
    setStep(d.secret ? { kind: 'secret', title: d.secret.title, secret: d.secret.value } : null);
    onDone();
  };
  const element = (width: number) => {
    if (!step) return null;
    if (step.kind === 'form')
      return (
        <Form
          key={step.title}
          title={step.title}
          note={step.note}
          fields={step.fields}
          error={step.error}
          width={width}
          onCancel={() => setStep(null)}
          onSubmit={async (values) => {
            if (live.current !== step) return;
            // Taken at once: a second Enter while the action runs finds no step.
            live.current = null;
            try {
              const next = await step.submit(values);
              if (isStep(next)) setStep(next);
              else finish(next);
            } catch (e) {
              setStep({ ...step, error: deps.describeError(e) });
            }
          }}
        />
      );
    if (step.kind === 'confirm')
      return (
        <Confirm
          title={step.title}
          lines={step.lines}
          width={width}
          onNo={() => {
            if (live.current !== step) return;
            setStep(null);
            setFlash({ ok: true, text: 'Cancelled: nothing was changed.' });
          }}
          onYes={async () => {
            if (live.current !== step) return;
            live.current = null;
            try {
              finish(await step.run());
            } catch (e) {
              setStep(null);
              setFlash({ ok: false, text: deps.describeError(e) });
            }
          }}
        />
      );
    return <SecretBox title={step.title} secret={step.secret} width={width} onClose={() => setStep(null)} />;
  };
  const open = (s: Step) => {
    setFlash(null);
    setStep(s);
  };
  // A step is often built from the selected row; an error building it (the row gone meanwhile)
  // shows in the flash instead of tearing the screen down.
  const fail = (e: unknown) => setFlash({ ok: false, text: deps.describeError(e) });
  // A step read through the store comes as a promise: opened when it settles.
  const openFrom = (make: () => Step | Promise<Step>) => {
    try {
      const s = make();
      if (s instanceof Promise) s.then(open, fail);
      else open(s);
    } catch (e) {
      fail(e);
    }
  };
  return { step, open, openFrom, element, isOpen: () => live.current !== null };
}
