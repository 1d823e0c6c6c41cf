import Foundation
@testable import LoginKit
import LoginKitHTTP
import Testing

/// The state machine on its own: every event in every state, and the cached path's queries.
@Suite struct AuthStateMachineTests {
    typealias Machine = AuthStateMachine

    /// The states a test starts from, each reached through events.
    enum Start: String, CaseIterable, Sendable {
        case idle, loggingIn, refreshing, loggingOut, loggingOutDuringARefresh, afterALogout
    }

    /// A machine in `start`; with the refresh's flight and task when one runs.
    static func machine(_ start: Start) -> (machine: Machine, flight: Flight<SharedCredentials>?, task: Task<Void, Never>?) {
        var machine = Machine()
        var flight: Flight<SharedCredentials>?
        var task: Task<Void, Never>?
        if start == .refreshing || start == .loggingOutDuringARefresh {
            guard case .waitForRefresh(let started, start: true) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
                Issue.record("no refresh started")
                return (machine, nil, nil)
            }
            let refreshTask = Task<Void, Never> {}
            machine.refreshStarted(refreshTask, for: started)
            flight = started
            task = refreshTask
        }
        switch start {
        case .loggingIn: _ = machine.loginRequested()
        case .loggingOut, .loggingOutDuringARefresh: _ = machine.logoutRequested()
        case .afterALogout:
            _ = machine.logoutRequested()
            machine.logoutFinished()
        case .idle, .refreshing: break
        }
        return (machine, flight, task)
    }

    /// A token action, with the flight it names reduced to whether it is new or the running one.
    static func shape(_ action: Machine.TokenAction, running: Flight<SharedCredentials>?) -> String {
        switch action {
        case .serve: "serve"
        case .serveAndRefresh(let start?): start === running ? "serveAndRefresh(running?)" : "serveAndRefresh(start)"
        case .serveAndRefresh(nil): "serveAndRefresh"
        case .waitForRefresh(let flight, let start): start ? "wait(start)" : (flight === running ? "wait(join)" : "wait(other)")
        case .loggedOut: "loggedOut"
        }
    }

    static let profile = Race.profile(Race.credentials(0, issuedAt: Race.t0))

    // MARK: Every event in every state

    @Test(arguments: Start.allCases)
    func aLoginStartsOnlyWhenNeitherALoginNorALogoutRuns(_ start: Start) {
        var machine = Self.machine(start).machine
        let expected: Machine.LoginAction =
            switch start {
            case .idle, .refreshing: .start(epoch: 0)
            case .afterALogout: .start(epoch: 2)
            case .loggingIn: .refuse(reason: "a login is already in progress")
            case .loggingOut, .loggingOutDuringARefresh: .refuse(reason: "a logout is in progress")
            }
        #expect(machine.loginRequested() == expected)
    }

    @Test(arguments: Start.allCases, [RefreshDecision.Verdict.serve, .serveAndRefresh, .refresh])
    func tokenRequestsStartOneRefreshAndJoinIt(_ start: Start, verdict: RefreshDecision.Verdict) {
        let setup = Self.machine(start)
        var machine = setup.machine
        let epoch = machine.epoch
        let expected: String =
            switch (start, verdict) {
            case (.loggingOut, _), (.loggingOutDuringARefresh, _): "loggedOut"
            case (_, .serve): "serve"
            case (.refreshing, .serveAndRefresh): "serveAndRefresh"
            case (_, .serveAndRefresh): "serveAndRefresh(start)"
            case (.refreshing, .refresh): "wait(join)"
            case (_, .refresh): "wait(start)"
            }
        let action = machine.tokenRequested(startedIn: epoch, verdict: verdict)
        #expect(Self.shape(action, running: setup.flight) == expected)
        let wasRefreshing = setup.flight != nil
        let startedOne = expected.hasSuffix("(start)")
        #expect(machine.isRefreshing == (wasRefreshing || startedOne))
        // A second caller joins the refresh the first one started.
        if case .waitForRefresh(let flight, start: true) = action {
            #expect(Self.shape(machine.tokenRequested(startedIn: epoch, verdict: .refresh), running: flight) == "wait(join)")
        }
    }

    @Test(arguments: Start.allCases)
    func aRequestFromBeforeALogoutGetsNothing(_ start: Start) {
        var machine = Self.machine(start).machine
        guard machine.epoch > 0 else { return }  // no logout yet: nothing is from before one
        for verdict in [RefreshDecision.Verdict.serve, .serveAndRefresh, .refresh] {
            #expect(machine.tokenRequested(startedIn: 0, verdict: verdict) == .loggedOut)
        }
        #expect(machine.loginSucceeded(startedIn: 0) == .discard)
        #expect(!machine.mayHandOut(startedIn: 0))
    }

    @Test(arguments: Start.allCases)
    func aLogoutBumpsTheEpochAndCancelsTheRunningRefresh(_ start: Start) {
        let setup = Self.machine(start)
        var machine = setup.machine
        let before = machine.epoch
        #expect(machine.logoutRequested() == .start(cancelRefresh: setup.task))
        #expect(machine.epoch == before + 1)
        #expect(!machine.mayHandOut(startedIn: before))
        #expect(!machine.mayHandOut(startedIn: before + 1), "not during the logout either")
    }

    @Test(arguments: Start.allCases)
    func aRefreshIsDeliveredOnlyInTheEpochItStartedIn(_ start: Start) {
        let setup = Self.machine(start)
        var machine = setup.machine
        if let running = setup.flight {
            let expected: Machine.RefreshResultAction = start == .refreshing ? .deliver : .loggedOut
            #expect(machine.refreshFinished(running) == expected)
            #expect(machine.isRefreshing == false)
            #expect(machine.refreshTask == nil)
        }
        #expect(machine.refreshFinished(Flight<SharedCredentials>()) == .loggedOut, "a refresh the state does not hold")
    }

    @Test(arguments: Start.allCases)
    func theCachedPathIsOfferedNothingWhileALogoutRuns(_ start: Start) {
        var machine = Self.machine(start).machine
        let epoch = machine.epoch
        _ = machine.tokenRequested(startedIn: epoch, verdict: .serve, read: HeldProfile(Self.profile), stamp: 7)
        let look = machine.cached(ifStamp: 7)
        #expect(look.epoch == epoch)
        let loggingOut = start == .loggingOut || start == .loggingOutDuringARefresh
        #expect((look.remembered == nil) == loggingOut)
        #expect((machine.knownProfile(startedIn: epoch) == nil) == loggingOut)
        #expect(machine.mayHandOut(startedIn: epoch) == !loggingOut)
    }

    // MARK: Logins

    @Test func aSecondLoginIsRefusedWhileOneIsUnderway() {
        var machine = Machine()
        #expect(machine.loginRequested() == .start(epoch: 0))
        #expect(machine.loginRequested() == .refuse(reason: "a login is already in progress"))
        machine.loginFinished(startedIn: 0)
        #expect(machine.loginRequested() == .start(epoch: 0))
    }

    @Test func aLoginIsRefusedDuringALogout() {
        var machine = Machine()
        _ = machine.logoutRequested()
        #expect(machine.loginRequested() == .refuse(reason: "a logout is in progress"))
        machine.logoutFinished()
        #expect(machine.loginRequested() == .start(epoch: 2))
    }

    @Test func aLoginOvertakenByALogoutIsDiscarded() {
        var machine = Machine()
        guard case .start(let epoch) = machine.loginRequested() else { Issue.record("login refused"); return }
        #expect(machine.loginSucceeded(startedIn: epoch) == .save)
        _ = machine.logoutRequested()
        #expect(machine.loginSucceeded(startedIn: epoch) == .discard)
        #expect(machine.loginSaved(HeldProfile(Self.profile), startedIn: epoch) == .discard)
        machine.loginFinished(startedIn: epoch)  // the overtaken login ends: the logout still runs
        #expect(machine.loginRequested() == .refuse(reason: "a logout is in progress"))
        machine.logoutFinished()
        #expect(machine.knownProfile(startedIn: 2) == nil, "the discarded login left nothing to serve")
        #expect(machine.loginRequested() == .start(epoch: 2))
    }

    @Test func anOvertakenLoginDoesNotReopenTheGuardForTheNextOne() {
        var machine = Machine()
        #expect(machine.loginRequested() == .start(epoch: 0))  // L1
        _ = machine.logoutRequested()
        machine.logoutFinished()
        #expect(machine.loginRequested() == .start(epoch: 2))  // L2
        machine.loginFinished(startedIn: 0)  // L1 ends late
        #expect(machine.loginRequested() == .refuse(reason: "a login is already in progress"))  // L3
        machine.loginFinished(startedIn: 2)
        #expect(machine.loginRequested() == .start(epoch: 2))
    }

    @Test func aSavedLoginIsTheLastKnownProfile() {
        var machine = Machine()
        let held = HeldProfile(Self.profile)
        #expect(machine.loginSaved(held, startedIn: 0) == .save)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === held.credentials)
        #expect(machine.cached(ifStamp: 1).remembered == nil, "a login is not remembered for the cached path")
    }

    // MARK: Refreshes

    @Test func nobodyGetsCredentialsFromBeforeALogout() {
        var machine = Machine()
        guard case .waitForRefresh(let flight, start: true) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no refresh started")
            return
        }
        let task = Task<Void, Never> {}
        machine.refreshStarted(task, for: flight)
        #expect(machine.logoutRequested() == .start(cancelRefresh: task))
        // During the logout, and for requests and refreshes that began before it, after it.
        #expect(machine.tokenRequested(startedIn: 1, verdict: .serve) == .loggedOut)
        #expect(machine.refreshTask == task, "the logout awaits the refresh, and so does shutdown")
        #expect(machine.refreshFinished(flight) == .loggedOut)
        #expect(machine.isRefreshing == false)
        machine.logoutFinished()
        #expect(machine.tokenRequested(startedIn: 0, verdict: .serve) == .loggedOut)
        #expect(machine.tokenRequested(startedIn: 2, verdict: .serve) == .serve)
        #expect(machine.tokenRequested(startedIn: 1, verdict: .serve) == .loggedOut)
    }

    @Test func aFinishedRefreshIsNotHandedOutOnceALogoutBegan() {
        var machine = Machine()
        guard case .waitForRefresh(let flight, _) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no refresh started")
            return
        }
        #expect(machine.refreshFinished(flight) == .deliver)
        #expect(machine.mayHandOut(startedIn: 0))
        _ = machine.logoutRequested()
        #expect(!machine.mayHandOut(startedIn: 0))
        #expect(!machine.mayHandOut(startedIn: 1))  // not during the logout either
        machine.logoutFinished()
        #expect(machine.mayHandOut(startedIn: 2))
        #expect(!machine.mayHandOut(startedIn: 0))
    }

    @Test func aRefreshThatEndsInItsEpochIsDeliveredAndTheNextOneIsNew() {
        var machine = Machine()
        guard case .waitForRefresh(let first, _) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no refresh started")
            return
        }
        #expect(machine.refreshFinished(first) == .deliver)
        #expect(machine.isRefreshing == false)
        guard case .waitForRefresh(let second, start: true) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no second refresh started")
            return
        }
        #expect(second !== first)
        #expect(machine.refreshFinished(first) == .loggedOut, "the first one's end again: not the refresh the state holds")
        #expect(machine.isRefreshing, "and it does not end the second one")
    }

    @Test func theTaskOfAnotherFlightIsNotRegistered() {
        var machine = Machine()
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh)
        machine.refreshStarted(Task<Void, Never> {}, for: Flight<SharedCredentials>())
        #expect(machine.refreshTask == nil)
    }

    @Test func aLogoutWithNoRefreshCancelsNothingAndLogoutsNest() {
        var machine = Machine()
        #expect(machine.logoutRequested() == .start(cancelRefresh: nil))
        #expect(machine.logoutRequested() == .start(cancelRefresh: nil))
        machine.logoutFinished()
        #expect(machine.loginRequested() == .refuse(reason: "a logout is in progress"), "one logout still runs")
        #expect(!machine.mayHandOut(startedIn: 2))
        machine.logoutFinished()
        #expect(machine.mayHandOut(startedIn: 3))
        #expect(machine.epoch == 3)
        machine.logoutFinished()  // more ends than starts change nothing
        #expect(machine.epoch == 3)
    }

    @Test func aNestedLogoutAlsoCancelsTheRefreshTheFirstOneFound() {
        var machine = Machine()
        guard case .waitForRefresh(let flight, _) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no refresh started")
            return
        }
        let task = Task<Void, Never> {}
        machine.refreshStarted(task, for: flight)
        #expect(machine.logoutRequested() == .start(cancelRefresh: task))
        #expect(machine.logoutRequested() == .start(cancelRefresh: task))
        #expect(machine.refreshFinished(flight) == .loggedOut)
        #expect(machine.logoutRequested() == .start(cancelRefresh: nil))
    }

    // MARK: The cached path's queries

    @Test func aProfileIsRememberedOnlyWhenServedOrWaitedForAndNeverUnderAnOlderStamp() {
        var machine = Machine()
        let first = HeldProfile(Self.profile)
        let older = HeldProfile(Self.profile)
        let later = HeldProfile(Self.profile)
        #expect(machine.tokenRequested(startedIn: 0, verdict: .serve, read: first, stamp: 7) == .serve)
        #expect(machine.cached(ifStamp: 7).remembered?.credentials === first.credentials)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === first.credentials)
        _ = machine.tokenRequested(startedIn: 0, verdict: .serve, read: older, stamp: 5)
        #expect(machine.cached(ifStamp: 7).remembered?.credentials === first.credentials, "a step that finished late does not win")
        #expect(machine.cached(ifStamp: 5).remembered == nil)
        #expect(machine.cached(ifStamp: 8).remembered == nil, "the store changed since")
        #expect(machine.cached(ifStamp: nil).remembered == nil, "no stamps, no cached path")
        // Served with a refresh in the background: the last known profile, not remembered.
        _ = machine.tokenRequested(startedIn: 0, verdict: .serveAndRefresh, read: later, stamp: 9)
        #expect(machine.cached(ifStamp: 9).remembered == nil)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === later.credentials)
        // Waiting for the refresh: remembered (the calls that follow wait without the actor), not the last known.
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh, read: first, stamp: 9)
        #expect(machine.cached(ifStamp: 9).remembered?.credentials === first.credentials)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === later.credentials)
    }

    @Test func theRunningRefreshIsOfferedOnlyWithTheProfileRememberedUnderTheStamp() {
        var machine = Machine()
        #expect(machine.cached(ifStamp: 7).refresh == nil, "nothing remembered, nothing running")
        _ = machine.tokenRequested(startedIn: 0, verdict: .serve, read: HeldProfile(Self.profile), stamp: 7)
        #expect(machine.cached(ifStamp: 7).refresh == nil, "nothing running")
        guard case .waitForRefresh(let flight, start: true) = machine.tokenRequested(startedIn: 0, verdict: .refresh) else {
            Issue.record("no refresh started")
            return
        }
        #expect(machine.cached(ifStamp: 7).refresh === flight)
        #expect(machine.cached(ifStamp: 8).refresh == nil, "the store changed since: the actor reads it")
        #expect(machine.refreshFinished(flight) == .deliver)
        #expect(machine.cached(ifStamp: 7).refresh == nil, "ended: no caller joins it after")
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh)
        _ = machine.logoutRequested()
        machine.logoutFinished()
        _ = machine.tokenRequested(startedIn: 2, verdict: .serve, read: HeldProfile(Self.profile), stamp: 9)
        #expect(machine.cached(ifStamp: 9).refresh == nil, "the refresh of the old epoch is not offered in the new one")
    }

    @Test func aRefreshSavedInItsEpochIsRememberedUnderTheStampOfItsWrite() {
        var machine = Machine()
        let saved = HeldProfile(Self.profile)
        machine.refreshSaved(saved, stamp: 12, startedIn: 0)
        #expect(machine.cached(ifStamp: 12).remembered?.credentials === saved.credentials)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === saved.credentials)
        let unsaved = HeldProfile(Self.profile)
        machine.refreshSaved(unsaved, stamp: nil, startedIn: 0)  // the save failed: served, not vouched for
        #expect(machine.cached(ifStamp: 12).remembered?.credentials === saved.credentials)
        #expect(machine.knownProfile(startedIn: 0)?.credentials === unsaved.credentials)
        _ = machine.logoutRequested()
        machine.logoutFinished()
        machine.refreshSaved(HeldProfile(Self.profile), stamp: 13, startedIn: 0)  // from before the logout
        #expect(machine.cached(ifStamp: 13).remembered == nil)
        #expect(machine.knownProfile(startedIn: 2) == nil)
    }

    @Test func aLogoutForgetsTheRememberedProfileTheReadAndTheRefresh() {
        var machine = Machine()
        let held = HeldProfile(Self.profile)
        _ = machine.tokenRequested(startedIn: 0, verdict: .serve, read: held, stamp: 7)
        _ = machine.tokenRequested(startedIn: 0, verdict: .refresh)
        guard case .read(_, let reading?) = machine.readRequested(stamp: 7, mayJoin: true, startedIn: nil) else {
            Issue.record("the read was not announced")
            return
        }
        #expect(machine.cached(ifStamp: 7).read === reading)
        _ = machine.logoutRequested()
        let during = machine.cached(ifStamp: 7)
        #expect(during.remembered == nil && during.refresh == nil && during.read == nil)
        #expect(machine.knownProfile(startedIn: 1) == nil)
        #expect(machine.readRequested(stamp: 7, mayJoin: true, startedIn: nil) == .read(epoch: 1, announced: nil), "nothing is announced during a logout")
        machine.logoutFinished()
        let look = machine.cached(ifStamp: 7)
        #expect(look.epoch == 2)
        #expect(look.remembered == nil && look.refresh == nil && look.read == nil, "nor after it")
        #expect(machine.knownProfile(startedIn: 1) == nil)
        #expect(machine.isRefreshing == false)
    }

    @Test func aStoreReadIsJoinedUnderItsStampAndEpochOnly() {
        var machine = Machine()
        #expect(machine.readRequested(stamp: nil, mayJoin: true, startedIn: nil) == .read(epoch: 0, announced: nil), "no stamps: nothing to join")
        guard case .read(0, let first?) = machine.readRequested(stamp: 7, mayJoin: true, startedIn: nil) else {
            Issue.record("the read was not announced")
            return
        }
        #expect(machine.readRequested(stamp: 7, mayJoin: true, startedIn: nil) == .join(first))
        #expect(machine.readRequested(stamp: 7, mayJoin: true, startedIn: 0) == .join(first))
        #expect(machine.cached(ifStamp: 8).read == nil, "another stamp")
        // A call that has joined enough reads reads itself; later calls join its read.
        guard case .read(0, let second?) = machine.readRequested(stamp: 7, mayJoin: false, startedIn: 0) else {
            Issue.record("the read was not announced")
            return
        }
        #expect(second !== first)
        #expect(machine.cached(ifStamp: 7).read === second)
        machine.readEnded(first)
        #expect(machine.cached(ifStamp: 7).read === second, "another read's end changes nothing")
        machine.readEnded(second)
        #expect(machine.cached(ifStamp: 7).read == nil, "ended: nobody joins it after")
        // A call that began before a logout is turned away after it.
        _ = machine.logoutRequested()
        #expect(machine.readRequested(stamp: 7, mayJoin: true, startedIn: 0) == .loggedOut)
        machine.logoutFinished()
        #expect(machine.readRequested(stamp: 7, mayJoin: true, startedIn: 0) == .loggedOut)
    }

    @Test func theLastKnownProfileIsForgottenWhenTheStoreHasNone() {
        var machine = Machine()
        _ = machine.tokenRequested(startedIn: 0, verdict: .serve, read: HeldProfile(Self.profile), stamp: nil)
        #expect(machine.knownProfile(startedIn: 0) != nil)
        #expect(machine.knownProfile(startedIn: 1) == nil, "not for a request of another epoch")
        machine.profileMissing(startedIn: 0)
        #expect(machine.knownProfile(startedIn: 0) == nil)
    }
}
