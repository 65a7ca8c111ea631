// Once before the stories: the dashboard build that each story's `next start` serves.
import { buildDashboardIfNeeded } from './processes.ts';

export default function globalSetup(): void {
  buildDashboardIfNeeded();
}
