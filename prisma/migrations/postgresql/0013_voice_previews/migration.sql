-- Voices' greeting samples (Voice.sampleBlobId) are previews now (VoicePreview, remade by the
-- preview worker): the old ones leave their org's storage before the column goes.
UPDATE "Org" SET "blobBytes" = "blobBytes" - COALESCE((
    SELECT SUM(b."sizeBytes") FROM "Blob" b
     WHERE b."orgId" = "Org"."id" AND b."deletedAt" IS NULL
       AND b."id" IN (SELECT "sampleBlobId" FROM "Voice" WHERE "sampleBlobId" IS NOT NULL)), 0);
UPDATE "Blob" SET "deletedAt" = (now() AT TIME ZONE 'UTC')
 WHERE "deletedAt" IS NULL AND "id" IN (SELECT "sampleBlobId" FROM "Voice" WHERE "sampleBlobId" IS NOT NULL);

-- CreateEnum
CREATE TYPE "PreviewStatus" AS ENUM ('pending', 'ready', 'failed');

-- AlterTable
ALTER TABLE "Voice" DROP COLUMN "sampleBlobId";

-- AlterTable
ALTER TABLE "VoiceProfile" ADD COLUMN     "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP;

-- AlterTable
ALTER TABLE "Blob" ALTER COLUMN "orgId" DROP NOT NULL;

-- CreateTable
CREATE TABLE "VoicePreview" (
    "id" TEXT NOT NULL,
    "voiceId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "stamp" TEXT NOT NULL,
    "status" "PreviewStatus" NOT NULL DEFAULT 'pending',
    "blobId" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "runAfter" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lockedBy" TEXT,
    "lockedUntil" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "VoicePreview_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "VoicePreview_status_runAfter_idx" ON "VoicePreview"("status", "runAfter");

-- CreateIndex
CREATE UNIQUE INDEX "VoicePreview_voiceId_modelId_key" ON "VoicePreview"("voiceId", "modelId");

-- AddForeignKey
ALTER TABLE "VoicePreview" ADD CONSTRAINT "VoicePreview_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice"("id") ON DELETE CASCADE ON UPDATE CASCADE;
