/**
 * The cookie the browser uses to say which of the user's orgs it acts for (the org switcher
 * sets it). A request, not a grant: orgProcedure and the gateway proxy check the membership and
 * fall back to the user's oldest org when it names one they do not belong to. No import here,
 * so the browser bundle can use the name too.
 */
export const ORG_COOKIE = 'svc_org';
