-- Usage moves onto the debit's ledger row (one row per metered request instead of two).
-- Edited from the generated diff: each existing usage row is copied onto its debit (same
-- org, request, timestamp and amount; both were written in one statement) before the
-- UsageEvent table goes.

-- AlterTable
ALTER TABLE "LedgerEntry" ADD COLUMN     "audioMillis" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "characters" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "inputTokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "modality" "Modality",
ADD COLUMN     "modelId" TEXT,
ADD COLUMN     "outputTokens" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "route" TEXT;

-- Copy usage onto the debits
UPDATE "LedgerEntry" AS l
   SET "modelId" = u."modelId", "modality" = u."modality", "route" = u."route",
       "inputTokens" = u."inputTokens", "outputTokens" = u."outputTokens",
       "characters" = u."characters", "audioMillis" = u."audioMillis"
  FROM "UsageEvent" AS u
 WHERE l."kind" = 'usage' AND u."orgId" = l."orgId" AND u."requestId" = l."requestId"
   AND u."createdAt" = l."createdAt" AND u."costMicros" = -l."amountMicros";

-- DropForeignKey
ALTER TABLE "UsageEvent" DROP CONSTRAINT "UsageEvent_orgId_fkey";

-- DropTable
DROP TABLE "UsageEvent";
