-- AlterTable
ALTER TABLE "AgentRegistration" ADD COLUMN     "clientName" TEXT,
ADD COLUMN     "userAgent" TEXT;
