import HorizonBlueZ
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import Testing

/// The BlueZ radio's errors say what went wrong; the programs add what to do, chosen by the
/// error's kind (never by its words).
@Suite("The programs' advice for bluetoothd's errors")
struct BlueZAdviceTests {
    static let advised: [BlueZError.Kind: String] = [
        .notPermitted: "install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth'",
        .inProgress: "retry",
        .noReply: "is it stuck?",
        .noServer: "start it (systemctl start dbus) before bluetoothd",
    ]

    @Test func theAdviceIsChosenByKind() {
        for kind in BlueZError.Kind.allCases {
            #expect(BlueZAdvice.advice(for: kind) == Self.advised[kind], "\(kind)")
        }
    }

    static func told(_ name: String, _ message: String = "") -> String {
        BlueZAdvice.cliMessage(
            for: .bluez(BlueZError(name: name, message: message), doing: "registering the advertisement"))
    }

    @Test func aPersonIsToldWhatWentWrongThenWhatToDo() {
        #expect(
            Self.told("org.bluez.Error.NotPermitted")
                == "bluetoothd refused registering the advertisement; install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth' (org.bluez.Error.NotPermitted)"
        )
        #expect(
            Self.told("org.bluez.Error.InProgress")
                == "another operation is in progress on the adapter (registering the advertisement); retry (org.bluez.Error.InProgress)"
        )
        #expect(
            Self.told("org.freedesktop.DBus.Error.NoReply")
                == "bluetoothd did not answer registering the advertisement in time; is it stuck? (org.freedesktop.DBus.Error.NoReply)"
        )
        #expect(
            Self.told("org.freedesktop.DBus.Error.NoServer")
                == "the system D-Bus is not running; start it (systemctl start dbus) before bluetoothd (org.freedesktop.DBus.Error.NoServer)"
        )
        // Kinds without advice read as the library says them.
        #expect(
            Self.told("org.bluez.Error.AlreadyExists")
                == "registering the advertisement: already registered (a previous run did not clean up) (org.bluez.Error.AlreadyExists)"
        )
        #expect(
            Self.told("org.bluez.Error.Failed", "Operation failed")
                == "registering the advertisement failed: Operation failed (org.bluez.Error.Failed)")
    }

    @Test func onlyTheErrorNameChoosesTheAdvice() {
        // Another backend's error that mentions a BlueZ name in its words gets none.
        let simulated = RadioError.backend(name: "radio-server", message: "org.bluez.Error.NotPermitted")
        #expect(BlueZAdvice.cliMessage(for: simulated) == simulated.description)
        #expect(BlueZAdvice.sentence(for: simulated) == nil)
        // The advice the programs give every radio error still comes with it.
        #expect(
            BlueZAdvice.cliMessage(for: .adapterUnavailable(.unsupported))
                == "no Bluetooth LE adapter found; plug in a dongle, or use --radio simulated")
    }

    @Test func theCashierAndTheCustomerGetTheAdvice() {
        let refused = RadioError.bluez(BlueZError(name: "org.bluez.Error.NotPermitted"), doing: "starting discovery")
        let advice = "install udev/org.horizon.Terminal.conf and run as a member of 'bluetooth'"
        #expect(HostError.radio(refused).cliMessage(noun: "payment").contains(advice))
        #expect(PaymentClientError.connectionFailed(refused).cliMessage.contains(advice))
    }
}
