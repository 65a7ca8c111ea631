-- AlterTable
ALTER TABLE "AgentRegistration" ADD COLUMN "clientName" TEXT;
ALTER TABLE "AgentRegistration" ADD COLUMN "userAgent" TEXT;
