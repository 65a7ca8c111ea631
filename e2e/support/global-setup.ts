// Once before the stories: the dashboard build that each story's `next start` serves.
import { buildDashboardIfNeeded } from './processes.js';

export default function globalSetup(): void {
  buildDashboardIfNeeded();
}
