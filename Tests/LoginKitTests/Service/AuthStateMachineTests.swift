@testable import LoginKit
import Testing

/// The state machine on its own: every event in every phase.
@Suite struct AuthStateMachineTests {
    @Test func aSecondLoginIsRefusedWhileOneIsUnderway() {
        var machine = AuthStateMachine()
        #expect(machine.loginRequested() == .start(epoch: 0))
        #expect(machine.loginRequested() == .refuse(reason: "a login is already in progress"))
        machine.loginFinished(startedIn: 0)
        #expect(machine.loginRequested() == .start(epoch: 0))
    }

    @Test func aLoginIsRefusedDuringALogout() {
        var machine = AuthStateMachine()
        _ = machine.logoutRequested()
        #expect(machine.loginRequested() == .refuse(reason: "a logout is in progress"))
        machine.logoutFinished()
        #expect(machine.loginRequested() == .start(epoch: 1))
    }

    @Test func aLoginOvertakenByALogoutIsDiscarded() {
        var machine = AuthStateMachine()
        guard case .start(let epoch) = machine.loginRequested() else { Issue.record("login refused"); return }
        #expect(machine.loginSucceeded(startedIn: epoch) == .save)
        _ = machine.logoutRequested()
        #expect(machine.loginSucceeded(startedIn: epoch) == .discard)
        machine.loginFinished(startedIn: epoch)  // the overtaken login ends: the logout still runs
        #expect(machine.phase == .loggingOut(count: 1))
        machine.logoutFinished()
        #expect(machine.phase == .idle)
    }

    @Test(arguments: [
        (RefreshDecision.Verdict.serve, false, AuthStateMachine.TokenAction.serve, false),
        (.serveAndRefresh, false, .serveAndRefresh(start: true), true),
        (.serveAndRefresh, true, .serveAndRefresh(start: false), true),
        (.refresh, false, .waitForRefresh(start: true), true),
        (.refresh, true, .waitForRefresh(start: false), true),
        (.serve, true, .serve, true),
    ])
    func tokenRequestsStartOneRefreshAndJoinIt(
        verdict: RefreshDecision.Verdict, refreshing: Bool, expected: AuthStateMachine.TokenAction, refreshingAfter: Bool
    ) {
        var machine = AuthStateMachine()
        if refreshing { _ = machine.tokenRequested(startedIn: 0, verdict: .refresh) }
        #expect(machine.tokenRequested(startedIn: 0, verdict: verdict) == expected)
        #expect(machine.isRefreshing == refreshingAfter)
    }

    @Test func nobodyGetsCredentialsFromBeforeALogout() {
        var machine = AuthStateMachine()
        #expect(machine.tokenRequested(startedIn: 0, verdict: .refresh) == .waitForRefresh(start: true))
        #expect(machine.logoutRequested() == .start(cancelRefresh: true))
        // During the logout, and for requests and refreshes that began before it, after it.
        #expect(machine.tokenRequested(startedIn: 1, verdict: .serve) == .loggedOut)
        #expect(machine.refreshFinished(startedIn: 0) == .loggedOut)
        #expect(machine.isRefreshing == false)
        machine.logoutFinished()
        #expect(machine.tokenRequested(startedIn: 0, verdict: .serve) == .loggedOut)
        #expect(machine.tokenRequested(startedIn: 1, verdict: .serve) == .serve)
    }

    @Test func anOvertakenLoginDoesNotReopenTheGuardForTheNextOne() {
        var machine = AuthStateMachine()
        #expect(machine.loginRequested() == .start(epoch: 0))  // L1
        _ = machine.logoutRequested()
        machine.logoutFinished()
        #expect(machine.loginRequested() == .start(epoch: 1))  // L2
        machine.loginFinished(startedIn: 0)  // L1 ends late
        #expect(machine.loginRequested() == .refuse(reason: "a login is already in progress"))  // L3
        machine.loginFinished(startedIn: 1)
        #expect(machine.phase == .idle)
    }

    @Test func aFinishedRefreshIsNotHandedOutOnceALogoutBegan() {
        var machine = AuthStateMachine()
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh)
        #expect(machine.refreshFinished(startedIn: 0) == .deliver)
        #expect(machine.mayHandOut(startedIn: 0))
        _ = machine.logoutRequested()
        #expect(!machine.mayHandOut(startedIn: 0))
        #expect(!machine.mayHandOut(startedIn: 1))  // not during the logout either
        machine.logoutFinished()
        #expect(machine.mayHandOut(startedIn: 1))
    }

    @Test func aRefreshThatEndsInItsEpochIsDelivered() {
        var machine = AuthStateMachine()
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh)
        #expect(machine.refreshFinished(startedIn: 0) == .deliver)
        #expect(machine.isRefreshing == false)
        #expect(machine.tokenRequested(startedIn: 0, verdict: .refresh) == .waitForRefresh(start: true))
    }

    @Test func aLogoutWithNoRefreshCancelsNothingAndLogoutsNest() {
        var machine = AuthStateMachine()
        #expect(machine.logoutRequested() == .start(cancelRefresh: false))
        #expect(machine.logoutRequested() == .start(cancelRefresh: false))
        machine.logoutFinished()
        #expect(machine.phase == .loggingOut(count: 1))
        machine.logoutFinished()
        #expect(machine.phase == .idle)
        #expect(machine.epoch == 2)
    }
}
