-- AlterTable
ALTER TABLE "VoiceProfile" ADD COLUMN     "error" TEXT;

-- AlterTable
ALTER TABLE "Blob" ADD COLUMN     "durationMs" INTEGER;

-- AlterTable
ALTER TABLE "AgentRegistration" ADD COLUMN     "assertionExpiresAt" TIMESTAMP(3),
ADD COLUMN     "trialKeySealed" TEXT;

-- AlterTable
ALTER TABLE "ClaimAttempt" ADD COLUMN     "decidedByUserId" TEXT;
