// LoginKitMocks: test doubles for code that uses LoginKit. ManualClock today; the continuation-
// controlled MockAuthService, MockAuthAPI and MockHTTPTransport come with the view-model issue.
