import type { Metadata } from 'next';
import { PhoneTokens } from './phone-tokens';

export const metadata: Metadata = { title: 'Phone' };

export default function PhonePage() {
  return <PhoneTokens />;
}
