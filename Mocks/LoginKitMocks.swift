// LoginKitMocks: continuation-controlled doubles for users' tests (issue 6).
import LoginKit
