import { createContext, useContext } from 'react';

// Colours only where the terminal has them and NO_COLOR is unset; every state also reads in
// words or inverse video, so a monochrome terminal loses nothing.

export interface Theme {
  color: boolean;
  accent?: string;
  good?: string;
  bad?: string;
  warn?: string;
  none?: string;
}

export function makeTheme(color: boolean): Theme {
  return color ? { color, accent: 'cyan', good: 'green', bad: 'red', warn: 'yellow' } : { color };
}

export function colorWanted(
  env: NodeJS.ProcessEnv,
  stream: { hasColors?: (n?: number) => boolean } | undefined,
): boolean {
  if ('NO_COLOR' in env && env.NO_COLOR !== '') return false;
  return typeof stream?.hasColors === 'function' ? stream.hasColors() : false;
}

export const ThemeContext = createContext<Theme>(makeTheme(false));
export const useTheme = () => useContext(ThemeContext);
